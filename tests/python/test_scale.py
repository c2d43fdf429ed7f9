"""The loader stays linear in shards and tensors (issue 54, items 7 and
10), guarded by counting work, not by timing: the paths made for a
checkpoint of N shards, the files a reader looks through to open the next
one, the reads in flight at once in weights_iterator."""
import json
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import torch  # noqa: E402
from test_gdunlock_api import write_safetensors  # noqa: E402

import gdunlock  # noqa: E402
from gdunlock import iterator, plans, reader  # noqa: E402
from gdunlock._lib import lib  # noqa: E402



def sharded(folder, count, per_shard=2):
    """count numbered shards of per_shard U8 tensors and their index;
    returns the index's path."""
    weight_map = {}
    for s in range(count):
        name = f"model-{s + 1:05d}-of-{count:05d}.safetensors"
        tensors = {f"layers.{s}.w{t}": ("U8", [3], bytes([s % 251, t, 7]))
                   for t in range(per_shard)}
        write_safetensors(os.path.join(folder, name), tensors)
        weight_map.update({n: name for n in tensors})
    index = os.path.join(folder, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return index


class Counted:
    """A library function wrapped to count its calls."""

    def __init__(self, name):
        self.name, self.calls = name, 0
        self.real = getattr(lib(), name)

    def __call__(self, *args):
        self.calls += 1
        return self.real(*args)

    def __enter__(self):
        self.patch = mock.patch.object(lib(), self.name, self)
        self.patch.start()
        return self

    def __exit__(self, *exc):
        self.patch.stop()


@unittest.skipIf(torch is None, "torch is not installed")
class ShardScaleTest(unittest.TestCase):
    def test_one_path_made_per_shard(self):
        """weights_iterator and safe_open over an index of N shards make
        each shard's path once: file_ref made the list of all N paths for
        each shard's, N * N in all: quadratic in the shards."""
        for count in (20, 60):
            with tempfile.TemporaryDirectory() as d:
                index = sharded(d, count)
                with Counted("gdu_st_model_file_path") as paths:
                    got = dict(gdunlock.weights_iterator(index, device="cpu"))
                self.assertEqual(len(got), 2 * count)
                self.assertLessEqual(paths.calls, count, count)
                for backend in ("mmap", "pread"):  # the file's mapping, the engine
                    with Counted("gdu_st_model_file_path") as paths:
                        with gdunlock.safe_open(index, "pt", device="cpu", backend=backend) as f:
                            self.assertEqual(len([f.get_tensor(k) for k in f.keys()]), 2 * count)
                    self.assertLessEqual(paths.calls, 2 * count, (count, backend))

    def test_a_shard_is_planned_when_the_walk_reaches_it(self):
        """weights_iterator over an index of N shards makes each shard's
        tensor records and file handle as the reads reach it: the first
        tensor comes after a bounded number of them, not all N shards'
        (made at the opening, they were all held until the end, and
        Python's collector walked them over and over)."""
        count = 3 * iterator.READS_AHEAD
        with tempfile.TemporaryDirectory() as d:
            index = sharded(d, count)
            with Counted("gdu_st_model_tensor") as infos:
                with Counted("gdu_st_model_file_path") as paths:
                    it = gdunlock.weights_iterator(index, device="cpu")
                    name, tensor = next(it)
                    first = (infos.calls, paths.calls)
                    rest = dict(it)
            self.assertEqual((name, bytes(tensor.tolist())), ("layers.0.w0", bytes([0, 0, 7])))
            self.assertEqual(len(rest), 2 * count - 1)
            # the first batch of reads ahead: READS_AHEAD tensors, 2 a shard
            self.assertLessEqual(first[0], iterator.READS_AHEAD + 2, first)
            self.assertLessEqual(first[1], iterator.READS_AHEAD // 2 + 1, first)
            self.assertEqual(infos.calls, 2 * count)

    def test_negative_file_index_counts_from_the_end(self):
        with tempfile.TemporaryDirectory() as d:
            with gdunlock.Checkpoint(sharded(d, 3)) as ckpt:
                self.assertEqual(ckpt.file_ref(-1).index, 2)
                self.assertEqual(ckpt.file_ref(-1).path, ckpt.files[2])
                with self.assertRaises(IndexError):
                    ckpt.file_ref(3)

    def test_opening_a_file_looks_at_no_file_with_reads_out(self):
        """A reader with many files with reads out opens the next one
        without looking through them: it closes the least recently used
        idle file, and only idle ones."""
        with tempfile.TemporaryDirectory() as d:
            index = sharded(d, 12, per_shard=1)
            with gdunlock.Checkpoint(index) as ckpt:
                refs = [ckpt.file_ref(i) for i in range(12)]
                infos = sorted(ckpt.tensors(), key=lambda t: t.file)
                r = reader.RangeReader(gdunlock._lib.TARGET_HOST, 0, max_open=4)
                r._files = LookedAt()
                try:
                    bufs = [ctypes_buffer(3) for _ in infos]
                    out = [r.submit(refs[t.file], [(t.file_offset, 3, b[1])], b[0])
                           for t, b in zip(infos[:8], bufs)]
                    self.assertEqual(len(r._files), 8)  # none idle: none closed
                    self.assertEqual(r._files.looked_at, 0)
                    self.assertEqual(r._closable, {})
                    for p in out[:3]:
                        p.wait()
                    self.assertEqual(list(r._closable), [refs[i].key for i in range(3)])
                    later = r.submit(refs[8], [(infos[8].file_offset, 3, bufs[8][1])], bufs[8][0])
                    # over max_open: the 3 idle ones closed, oldest first
                    self.assertEqual(len(r._files), 6)
                    self.assertNotIn(refs[0].key, r._files)
                    for p in out[3:] + [later]:
                        p.wait()
                    for t, b in zip(infos[:9], bufs):
                        self.assertEqual(bytes(b[0]), bytes([t.file % 251, 0, 7]))
                finally:
                    r.close()


class LookedAt(dict):
    """A dict that counts the entries looked through (items())."""
    looked_at = 0

    def items(self):
        self.looked_at += len(self)
        return super().items()


def ctypes_buffer(n):
    import ctypes
    buf = ctypes.create_string_buffer(n)
    return buf, ctypes.addressof(buf)


@unittest.skipIf(torch is None, "torch is not installed")
class TensorScaleTest(unittest.TestCase):
    def test_iterator_bounds_reads_in_flight(self):
        """A file of many small tensors is read with at most READS_AHEAD
        reads in flight: the whole file was submitted at the first tensor,
        each read's memory and request held until handed out (a million
        tensors held 2.8 GB)."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "many.safetensors")
            count = 300
            write_safetensors(path, {f"t.{i:04d}": ("U8", [2], bytes([i % 256, 1]))
                                     for i in range(count)})
            with mock.patch.object(iterator, "READS_AHEAD", 16, create=True):
                it = gdunlock.weights_iterator(path, device="cpu")
                most = 0
                for name, tensor in it:
                    most = max(most, len(it._queue) + 1)
                    self.assertEqual(bytes(tensor.numpy()), bytes([int(name[2:]) % 256, 1]))
            self.assertLessEqual(most, 16)
            self.assertGreater(most, 1)  # still read ahead

    def test_small_tensors_share_requests(self):
        """Small whole tensors go to the engine in groups, each in its own
        memory: a request per tensor cost more than reading it."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "many.safetensors")
            count = 1000
            write_safetensors(path, {f"t.{i:04d}": ("I16", [2], bytes([i % 256, 0, 1, 0]))
                                     for i in range(count)})
            it = gdunlock.weights_iterator(path, device="cpu")
            got = dict(it)
            self.assertEqual(len(got), count)
            for name, tensor in got.items():
                self.assertEqual(tensor.tolist(), [int(name[2:]) % 256, 1])
            storages = {t.untyped_storage().data_ptr() for t in got.values()}
            self.assertEqual(len(storages), count)  # no tensor shares another's memory
            self.assertLessEqual(it.stats()["requests"], 10)  # a request per tensor before

    def test_get_tensor_of_small_tensors_shares_requests(self):
        """get_tensor of every key of a file of small tensors reads them
        ahead in groups, each in its own memory."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "many.safetensors")
            count = 1000
            write_safetensors(path, {f"t.{i:04d}": ("I16", [2], bytes([i % 256, 0, 1, 0]))
                                     for i in range(count)})
            got = {}
            # through the engine (the CPU's default backend maps the file)
            with gdunlock.safe_open(path, "pt", device="cpu", backend="pread") as f:
                for name in f.keys():
                    got[name] = f.get_tensor(name)
                requests = f.stats()["requests"]
            for name, tensor in got.items():
                self.assertEqual(tensor.tolist(), [int(name[2:]) % 256, 1])
            self.assertEqual(len({t.untyped_storage().data_ptr() for t in got.values()}), count)
            self.assertLessEqual(requests, 30)  # a request per tensor before

    def test_tensors_of_one_shape_share_a_plan(self):
        """The plan of a whole tensor is kept by its shape and dtype: a
        million tensors of few shapes made a million plans, each a few
        objects for the garbage collector to look through."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "many.safetensors")
            write_safetensors(path, {f"t.{i:04d}": ("U8", [2], bytes([i % 256, 1]))
                                     for i in range(500)})
            made = []
            real = plans.Plan

            def plan(*args):
                made.append(args)
                return real(*args)

            with mock.patch.object(plans, "Plan", plan):
                self.assertEqual(len(dict(gdunlock.weights_iterator(path, device="cpu"))), 500)
            self.assertLessEqual(len(made), 1)

    def test_a_failed_group_fails_each_of_its_tensors(self):
        class Failing:
            waits = 0

            def wait(self):
                Failing.waits += 1
                raise gdunlock.GdunlockError("GDU_ST_ERR_IO", "cut")

        shared = plans.SharedWait(Failing())
        for _ in range(3):
            with self.assertRaises(gdunlock.GdunlockError):
                shared.wait()
        self.assertEqual(Failing.waits, 1)


if __name__ == "__main__":
    unittest.main()
