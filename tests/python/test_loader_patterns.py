"""The calling patterns of issue 21 on the CPU (torch needed): slices read
ahead in key order like whole tensors, the iterator's select= and progress,
sub-byte dtypes sliced in elements or refused by name, read-ahead failures
raised by the call that needs those bytes, a bound on open shards, random
order without a scan per call, and close() racing a read."""
import _thread
import os
import struct
import sys
import tempfile
import threading
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import in_forked_child, torch  # noqa: E402
from test_gdunlock_api import file_bytes, write_safetensors  # noqa: E402

import gdunlock  # noqa: E402
from gdunlock import plans, reader, target, walk, walk_memory  # noqa: E402
from gdunlock.shards_ahead import registry  # noqa: E402
from gdunlock.walk_memory import memory, natural_key  # noqa: E402


def setUpModule():
    # Host memory stands in for a GPU here: the engine reads into it, where
    # safe_open's CPU default would map the file.
    gdunlock.safe_open.default_backend = "pread"


def tearDownModule():
    gdunlock.safe_open.default_backend = "mmap"


def layered(path, layers=6, rows=64, cols=48):
    """A small Llama-like file: per layer a 2-D q_proj and o_proj and a 1-D
    norm, F32, values that say where they stand."""
    tensors, values = {}, {}
    for i in range(layers):
        for name, shape in ((f"model.layers.{i}.self_attn.q_proj.weight", [rows, cols]),
                            (f"model.layers.{i}.self_attn.o_proj.weight", [cols, rows]),
                            (f"model.layers.{i}.input_layernorm.weight", [cols])):
            t = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32)
            t = (t + 1000 * i).reshape(shape)
            values[name] = t
            tensors[name] = ("F32", shape, t.numpy().tobytes())
    write_safetensors(path, tensors)
    return values


def rows(n, rank, world):
    """Rank's rows of n as tensor parallelism cuts them: ceil(n / world) a
    rank, the last rank's part short."""
    size = -(-n // world)
    return slice(rank * size, min(rank * size + size, n))


@unittest.skipIf(torch is None, "torch is not installed")
class SliceReadAheadTest(unittest.TestCase):
    def setUp(self):
        # what other tests' walks taught the process (the next shard is walked
        # as the last one was) must not predict this test's slices
        memory.reset()

    def test_slices_in_key_order_are_read_ahead(self):
        """A rank's rows of every 2-D tensor, in natural order: after the
        first layer the next layers' slices are already submitted (more
        requests than slices asked for when the walk is half done), only
        their bytes are read, and every result is right."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path)
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                keys = sorted(f.keys(), key=natural_key)
                wanted = [k for k in keys if len(f.get_slice(k).get_shape()) == 2]
                asked = 0
                for k in wanted[:len(wanted) // 2]:
                    n = f.get_slice(k).get_shape()[0]
                    got = f.get_slice(k)[n // 4: n // 2]
                    self.assertTrue(torch.equal(got, values[k][n // 4: n // 2]), k)
                    asked += 1
                self.assertGreater(f.stats()["requests"], asked)
                for k in wanted[len(wanted) // 2:]:
                    n = f.get_slice(k).get_shape()[0]
                    self.assertTrue(torch.equal(f.get_slice(k)[n // 4: n // 2],
                                                values[k][n // 4: n // 2]), k)
                want_bytes = sum(values[k][:values[k].shape[0] // 4].numel() * 4
                                 for k in wanted)
                self.assertEqual(f.stats()["bytes_read"], want_bytes)

    def test_families_not_seen_yet_are_cut_as_the_last_slice(self):
        """A rank's first slice of each family (a model's first layer) is
        read ahead as the slices before it were cut: the file's first cut
        for four times its bytes (the engine would idle while the caller
        waits for it), then, once two tensors of different lengths were cut
        alike (the same dimension, the same rank of the same number of
        ranks), up to the window; each byte read once. A family cut
        otherwise (columns after rows) gets its own bytes right."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            shapes = [("a.weight", [64, 48]), ("b.weight", [40, 48]), ("c.weight", [48, 24]),
                      ("d.weight", [30, 16]), ("e.weight", [48])]
            tensors, values = {}, {}
            for name, shape in shapes:
                t = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32)
                values[name] = t.reshape(shape)
                tensors[name] = ("F32", shape, t.numpy().tobytes())
            write_safetensors(path, tensors)

            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                want = 0
                for name in ("a.weight", "b.weight", "c.weight", "d.weight"):
                    n = values[name].shape[0]
                    got = f.get_slice(name)[rows(n, 3, 4)]
                    self.assertTrue(torch.equal(got, values[name][rows(n, 3, 4)]), name)
                    want += got.numel() * 4
                    if name == "a.weight":  # a guess, within four times a's bytes
                        self.assertEqual(sorted(f._walk.ahead), ["b.weight", "c.weight", "d.weight"])
                    if name == "b.weight":  # confirmed: c and d are on their way
                        self.assertEqual(sorted(f._walk.ahead), ["c.weight", "d.weight"])
                self.assertEqual(f.stats()["bytes_read"], want)  # e (1-D) not read
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                f.get_slice("a.weight")[rows(64, 1, 2)]
                f.get_slice("b.weight")[rows(40, 1, 2)]
                self.assertIn("c.weight", f._walk.ahead)
                got = f.get_slice("c.weight")[:, rows(24, 0, 2)]  # read ahead as rows
                self.assertTrue(torch.equal(got, values["c.weight"][:, rows(24, 0, 2)]))

    def test_a_fixed_range_of_rows_costs_at_most_its_first_cut_again(self):
        """Rows 16:32 of every tensor look like a tensor-parallel cut (rank 1
        of 3 of a 48-row o_proj) that the next tensor (a 64-row q_proj)
        contradicts: the guess reads at most four times the first cut's
        bytes for nothing, and every result is right."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path, layers=12)
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                wanted = [k for k in f.keys() if len(f.get_slice(k).get_shape()) == 2]
                for k in wanted:
                    self.assertTrue(torch.equal(f.get_slice(k)[16:32], values[k][16:32]), k)
                want = sum(values[k][16:32].numel() * 4 for k in wanted)
                first = values[wanted[0]][16:32].numel() * 4
                self.assertLessEqual(f.stats()["bytes_read"], want + 4 * first)
            # the next request cuts a tensor of the same length alike, which
            # confirms nothing: the guess ends there, before the tensors of
            # other lengths it would cut wrong
            path = os.path.join(d, "n.safetensors")
            # lengths that rows 16:32 never cut as a rank of a split
            shapes = [[n, 48] for n in (64, 64, 34, 36, 38, 40, 42, 44, 50, 52, 54, 56)]
            tensors, values = {}, {}
            for i, shape in enumerate(shapes):
                t = torch.arange(shape[0] * shape[1], dtype=torch.float32).reshape(shape) + i
                values[chr(ord("a") + i)] = t  # a family each
                tensors[chr(ord("a") + i)] = ("F32", shape, t.numpy().tobytes())
            write_safetensors(path, tensors)
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                for k in f.keys():
                    self.assertTrue(torch.equal(f.get_slice(k)[16:32], values[k][16:32]), k)
                self.assertLessEqual(f.stats()["bytes_read"], 12 * 16 * 48 * 4 + 4 * 16 * 48 * 4)

    def test_a_guess_reads_no_tensor_beyond_its_room(self):
        """A small first cut guesses the next tensor's part, which is far
        larger than four times the cut: it is not read ahead (a wrong guess
        would cost far more than the cut), and the walk reads each byte
        once."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            shapes = {"a.weight": [8, 4], "b.weight": [4096, 64]}
            tensors, values = {}, {}
            for name, shape in shapes.items():
                t = torch.arange(shape[0] * shape[1], dtype=torch.float32).reshape(shape)
                values[name], tensors[name] = t, ("F32", shape, t.numpy().tobytes())
            write_safetensors(path, tensors)
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                f.get_slice("a.weight")[rows(8, 1, 2)]
                self.assertEqual(len(f._walk.ahead), 0)
                self.assertEqual(f.stats()["bytes_read"], 4 * 4 * 4)
                got = f.get_slice("b.weight")[rows(4096, 1, 2)]
                self.assertTrue(torch.equal(got, values["b.weight"][rows(4096, 1, 2)]))
                self.assertEqual(f.stats()["bytes_read"], 4 * 4 * 4 + 2048 * 64 * 4)

    def test_a_guess_takes_one_tensor_past_the_window(self):
        """Within its room a guess is read ahead as a window takes tensors:
        one more than the window has room for (the first window, 64 MiB,
        bounds the 8-way benchmark's guess, and took the next layer's
        first part in the runs measured)."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path, layers=2)  # q_proj [64, 48], o_proj [48, 64]
            o = "model.layers.0.self_attn.o_proj.weight"
            q = "model.layers.0.self_attn.q_proj.weight"
            with mock.patch.object(walk, "FIRST_WINDOW", 1000), \
                    gdunlock.safe_open(path, "pt", device="cpu") as f:
                f.get_slice(o)[rows(48, 1, 4)]  # 12 rows, 3072 bytes: a guess of 12288
                self.assertIn(q, f._walk.ahead)  # 16 rows, 3072 bytes: past the window's 1000
                self.assertTrue(torch.equal(f.get_slice(q)[rows(64, 1, 4)],
                                            values[q][rows(64, 1, 4)]))

    def test_the_next_shard_is_walked_as_the_last(self):
        """A caller opens shard after shard (transformers, vLLM): what the
        first shard's walk taught predicts the second's first slices."""
        with tempfile.TemporaryDirectory() as d:
            first, second = os.path.join(d, "a.safetensors"), os.path.join(d, "b.safetensors")
            layered(first, layers=3)
            values = layered(second, layers=3)
            q, o = "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight"
            with gdunlock.safe_open(first, "pt", device="cpu") as f:
                f.get_slice(q)[:16]
            with gdunlock.safe_open(second, "pt", device="cpu") as f:
                f.get_slice(o)[:16]  # q_proj comes next: this file has not seen its family
                self.assertIn(q, f._walk.ahead)
                self.assertTrue(torch.equal(f.get_slice(q)[:16], values[q][:16]))

    def test_a_walk_that_contradicts_the_last_shards_yields(self):
        """Ranks loaded one after another in one process: rank 1's first
        request says the last walk (rank 0's) no longer predicts; its other
        families are then not read ahead with rank 0's index (each byte of
        rank 1's rows read once, none of rank 0's)."""
        with tempfile.TemporaryDirectory() as d:
            first, second = os.path.join(d, "a.safetensors"), os.path.join(d, "b.safetensors")
            layered(first)
            values = layered(second)
            with gdunlock.safe_open(first, "pt", device="cpu") as f:
                for k in sorted(f.keys(), key=natural_key):
                    shape = f.get_slice(k).get_shape()
                    if len(shape) == 2:
                        f.get_slice(k)[rows(shape[0], 0, 4)]
            with gdunlock.safe_open(second, "pt", device="cpu") as f:
                wanted = [k for k in sorted(f.keys(), key=natural_key)
                          if len(f.get_slice(k).get_shape()) == 2]
                for k in wanted:
                    cut = rows(values[k].shape[0], 1, 4)
                    self.assertTrue(torch.equal(f.get_slice(k)[cut], values[k][cut]), k)
                self.assertEqual(f.stats()["bytes_read"],
                                 sum(values[k][rows(values[k].shape[0], 1, 4)].numel() * 4
                                     for k in wanted))

    def test_a_walk_in_key_order_does_not_sort_naturally(self):
        """A rank's rows in keys() order, norms skipped: the walk stays in
        step without the natural order, which is not worked out (the first
        rank of a process sorted every shard's names so, for nothing), and
        each byte is read once. A walk in natural order then finds it."""
        memory.reset()  # another test's opens of these names
        calls = []
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.object(walk_memory, "natural_key",
                                  lambda name: (calls.append(name), natural_key(name))[1]):
            path = os.path.join(d, "m.safetensors")
            values = layered(path, layers=12)
            for order in (sorted, lambda keys: sorted(keys, key=natural_key)):
                with gdunlock.safe_open(path, "pt", device="cpu") as f:
                    wanted = [k for k in order(f.keys()) if len(f.get_slice(k).get_shape()) == 2]
                    cuts = {k: rows(values[k].shape[0], 1, 8) for k in wanted}
                    for k in wanted:
                        self.assertTrue(torch.equal(f.get_slice(k)[cuts[k]], values[k][cuts[k]]),
                                        k)
                    self.assertEqual(f.stats()["bytes_read"],
                                     sum(values[k][cuts[k]].numel() * 4 for k in wanted))
                    self.assertLess(f.stats()["requests"], 2 * len(wanted))
                    self.assertGreater(f._walk.window, 0)
                if order is sorted:
                    self.assertEqual(calls, [])
            self.assertNotEqual(calls, [])

    def test_a_thread_pool_in_key_order_is_read_ahead_once(self):
        """transformers materializes parameters in natural key order from a
        pool of 4 threads, so the requests arrive a little out of order: they
        must not reset the read-ahead (each tensor read exactly once)."""
        from concurrent.futures import ThreadPoolExecutor
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path, layers=12)
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                keys = sorted(f.keys(), key=natural_key)
                with ThreadPoolExecutor(4) as pool:
                    got = list(pool.map(lambda k: f.read_to(k, None, "cpu"), keys))
                for k, t in zip(keys, got):
                    self.assertTrue(torch.equal(t, values[k]), k)
                self.assertEqual(f.stats()["bytes_read"],
                                 sum(v.numel() * 4 for v in values.values()))
                self.assertGreater(f._walk.window, 0)

    def test_every_rank_of_each_tensor_is_read_ahead(self):
        """A process that holds every rank asks each tensor for all 4 ranks'
        rows, then all 4 ranks' columns, tensor after tensor, shard after
        shard: but for the first shard's first layer and each shard's first
        slice, every slice was submitted before it was asked (the next
        shard's first layer on the first one's word, a tensor's other
        slices once it is asked for one), each byte read once, every result
        right.
        (Predicting one index per family read 7 of each tensor's 8 slices
        only when asked; a family learned from the last shard kept only its
        first index and read the other 7 twice.)"""
        submitted, queue = [], plans.queue_plan

        def recording(reader_, source, info, plan):
            submitted.append((source.path, info.name, plan))
            return queue(reader_, source, info, plan)

        def part(shape, dim, rank):
            size = -(-shape[dim] // 4)
            cut = slice(rank * size, min(rank * size + size, shape[dim]))
            return (cut,) if dim == 0 else (slice(None), cut)
        with tempfile.TemporaryDirectory() as d:
            late = []
            for shard in ("a", "b"):
                path = os.path.join(d, f"{shard}.safetensors")
                values, want = layered(path, layers=4), 0
                with mock.patch.object(plans, "queue_plan", recording), \
                        gdunlock.safe_open(path, "pt", device="cpu") as f:
                    for k in sorted(f.keys(), key=natural_key):
                        shape = f.get_slice(k).get_shape()
                        if len(shape) != 2:
                            continue
                        for dim in (0, 1):
                            for rank in range(4):
                                index = part(shape, dim, rank)
                                plan = plans.plan_tensor(f._infos[k], index)
                                first = not want or (shard == "a" and ".layers.0." in k)
                                if not first and (path, k, plan) not in submitted:
                                    late.append((shard, k, dim, rank))
                                got = f.get_slice(k)[index]
                                self.assertTrue(torch.equal(got, values[k][index]),
                                                (shard, k, dim, rank))
                                want += got.numel() * 4
                    self.assertEqual(f.stats()["bytes_read"], want, shard)
            self.assertEqual(late, [])

    def test_an_index_asked_once_does_not_stay_in_the_pattern(self):
        """A caller reads every tensor whole, and the first q_proj also
        sliced: the next q_proj, asked only whole, ends that pattern, so
        the slice is read ahead for at most the tensors inside the window
        then, not for every later layer's."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path, layers=40)
            q0 = "model.layers.0.self_attn.q_proj.weight"
            with gdunlock.safe_open(path, "pt", device="cpu", readahead=32 << 10) as f:
                for k in sorted(f.keys(), key=natural_key):
                    self.assertTrue(torch.equal(f.get_tensor(k), values[k]), k)
                    if k == q0:
                        self.assertTrue(torch.equal(f.get_slice(k)[:16], values[k][:16]))
                whole = sum(v.numel() * 4 for v in values.values())
                rows = values[q0][:16].numel() * 4
                self.assertGreaterEqual(f.stats()["bytes_read"], whole + rows)
                self.assertLessEqual(f.stats()["bytes_read"], whole + 6 * rows)

    def test_a_tensor_asked_after_the_next_of_its_family_is_read_once(self):
        """What a pool of threads does now and then, in one thread: layer
        i's q_proj asked right after layer i + 1's. Every tensor is read
        once: the earlier one comes from the read-ahead, and the later one,
        no longer the family's last asked, is not read again."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path, layers=8)
            order = []
            for i in range(0, 8, 2):
                later = [f"model.layers.{i + 1}.{n}" for n in
                         ("input_layernorm.weight", "self_attn.o_proj.weight")]
                order += [f"model.layers.{i}.input_layernorm.weight",
                          f"model.layers.{i}.self_attn.o_proj.weight", *later,
                          f"model.layers.{i + 1}.self_attn.q_proj.weight",
                          f"model.layers.{i}.self_attn.q_proj.weight"]
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                self.assertEqual(sorted(order), sorted(f.keys()))
                for k in order:
                    self.assertTrue(torch.equal(f.read_to(k, None, "cpu"), values[k]), k)
                self.assertEqual(f.stats()["bytes_read"],
                                 sum(v.numel() * 4 for v in values.values()))

    def test_a_tensor_read_row_by_row_costs_each_request_the_same(self):
        """Every row of each q_proj asked on its own (512 indices a tensor):
        the family remembers a bounded number of them, so planning stays
        linear in the requests (each index planned a bounded number of
        times), and every row is right."""
        made, plan_tensor = [0], plans.plan_tensor

        def counting(info, index=None):
            made[0] += 1
            return plan_tensor(info, index)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path, layers=3, rows=512, cols=4)
            asked = 0
            with mock.patch.object(walk, "plan_tensor", counting), \
                    mock.patch.object(sys.modules["gdunlock.safe_open"], "plan_tensor", counting), \
                    gdunlock.safe_open(path, "pt", device="cpu") as f:
                for i in range(3):
                    k = f"model.layers.{i}.self_attn.q_proj.weight"
                    s = f.get_slice(k)
                    for r in range(512):
                        self.assertTrue(torch.equal(s[r], values[k][r]), (k, r))
                        asked += 1
            self.assertLess(made[0], 16 * asked)

    def test_columns_are_one_request_per_slice(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path, layers=1)
            k = "model.layers.0.self_attn.q_proj.weight"
            with gdunlock.safe_open(path, "pt", device="cpu", readahead=0) as f:
                got = f.get_slice(k)[:, 12:24]
                self.assertTrue(torch.equal(got, values[k][:, 12:24]))
                self.assertEqual(f.stats()["requests"], 1)
                self.assertEqual(f.stats()["bytes_read"], 64 * 12 * 4)

    def test_a_mispredicted_slice_is_read_again_right(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            values = layered(path)
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                for i in range(6):
                    k = f"model.layers.{i}.self_attn.q_proj.weight"
                    index = (slice(0, 8),) if i % 2 else (slice(None), slice(3, 9))
                    self.assertTrue(torch.equal(f.get_slice(k)[index], values[k][index]), k)

    def test_random_order_does_not_scan(self):
        """Each request looks up positions in dicts: 3,000 keys asked at
        random cost no more than the same keys in order, give or take."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "many.safetensors")
            write_safetensors(path, {f"t{i:05d}": ("U8", [4], bytes([i % 256]) * 4)
                                     for i in range(3000)})
            with gdunlock.safe_open(path, "pt") as f:
                keys = f.keys()
                import random
                random.Random(1).shuffle(keys)
                for k in keys:
                    self.assertEqual(f.get_tensor(k)[0].item(), int(k[1:]) % 256)

    def test_a_shard_walked_as_the_last_looks_at_each_key_once(self):
        """The second shard of a walk is predicted by the first's: that
        each family, asked in it the first time, is asked as predicted
        does not send the read-ahead back over the keys of the file (it
        did, once a family: 182 looks at 48 keys, now 47)."""
        looks, predict = [0], walk.Walk.predict

        def counting(self_, name):
            looks[0] += 1
            return predict(self_, name)
        families = [f"mlp.{n}.weight" for n in ("gate", "up", "down", "w4", "w5", "w6", "w7",
                                                "w8")]
        with tempfile.TemporaryDirectory() as d:
            for shard in ("a", "b"):
                path = os.path.join(d, f"{shard}.safetensors")
                write_safetensors(path, {f"model.layers.{i}.{n}": ("F32", [16, 8], bytes(512))
                                         for i in range(6) for n in families})
                looks[0] = 0
                with mock.patch.object(walk.Walk, "predict", counting), \
                        gdunlock.safe_open(path, "pt", device="cpu") as f:
                    for k in sorted(f.keys(), key=natural_key):
                        self.assertEqual(f.get_slice(k)[4:8].shape, (4, 8))
                    keys = len(f.keys())
            self.assertLessEqual(looks[0], 2 * keys)


def numbered_shards(folder, n=3, layers=2, rows=64, cols=48):
    """n shards named as save_pretrained names them, `layers` layers each
    (2-D q_proj, o_proj, up_proj, a 1-D norm); the first also holds an
    embedding, the last an lm_head: families no other shard has."""
    paths, values = [], {}
    for s in range(n):
        shapes = {}
        for i in range(s * layers, (s + 1) * layers):
            shapes.update({f"model.layers.{i}.self_attn.q_proj.weight": [rows, cols],
                           f"model.layers.{i}.self_attn.o_proj.weight": [cols, rows],
                           f"model.layers.{i}.mlp.up_proj.weight": [2 * rows, cols],
                           f"model.layers.{i}.input_layernorm.weight": [cols]})
        if s == 0:
            shapes["model.embed_tokens.weight"] = [3 * rows, cols]
        if s == n - 1:
            shapes["lm_head.weight"] = [3 * rows, cols]
        tensors = {}
        for name, shape in shapes.items():
            t = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32)
            values[name] = (t + 1000 * len(values)).reshape(shape)
            tensors[name] = ("F32", shape, values[name].numpy().tobytes())
        paths.append(os.path.join(folder, f"model-{s + 1:05d}-of-{n:05d}.safetensors"))
        write_safetensors(paths[-1], tensors)
    return paths, values


class ShardWalks:
    """Walks of numbered shards for the tests below, and what the walks
    left opened ahead given back."""

    def setUp(self):
        memory.reset()
        self.give_back()
        self.addCleanup(self.give_back)

    def give_back(self):
        registry.give_back_all()

    def keeping(self):
        """A patch of registry.keep that records each safe_open made
        ahead in self.kept (real path -> it), so that a check finds it
        also once it was given back: with a short wait that can happen
        before the walk that made it ends, on a busy machine."""
        self.kept = {}
        keep = registry.keep

        def record(key, made, stat, lenient):
            self.kept[key] = made
            return keep(key, made, stat, lenient)
        return mock.patch.object(registry, "keep", record)

    def given_back_in_time(self, path):
        """Whether the safe_open of path made ahead (recorded by keeping())
        is closed, and none is left waiting, within 5 s."""
        made = self.kept.get(os.path.realpath(path))
        if made is None:
            return False
        for _ in range(500):
            if made._closed:
                break
            threading.Event().wait(0.01)
        return made._closed and not registry.made

    def walk(self, f, values, rank, world):
        """rank's rows of every 2-D tensor of f, checked; their bytes."""
        want = 0
        for k in f.keys():
            shape = f.get_slice(k).get_shape()
            if len(shape) == 2:
                got = f.get_slice(k)[rows(shape[0], rank, world)]
                self.assertTrue(torch.equal(got, values[k][rows(shape[0], rank, world)]), k)
                want += got.numel() * 4
        return want

    def walk_in_turn(self, paths, values, rank, world):
        """rank's rows of every shard, opened in turn as serving engines
        do: each shard after the first has reads out before its first
        request, and each byte is read once."""
        for i, path in enumerate(paths):
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                at_open = f.stats()["requests"]
                want = self.walk(f, values, rank, world)
                self.assertEqual(f.stats()["bytes_read"], want, (rank, path))
            if i:
                self.assertGreater(at_open, 0, (rank, path))


@unittest.skipIf(torch is None, "torch is not installed")
class NextShardReadAheadTest(ShardWalks, unittest.TestCase):
    """A caller that opens a checkpoint's shards in turn (transformers,
    vLLM, a tensor-parallel rank): the next shard is opened and its first
    slices read while the walk of this one ends."""

    def test_the_next_shard_is_read_while_this_one_is_walked(self):
        """Shards 2 and 3 have reads out before their first request (none
        had), every result is right and each byte is read once."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            self.walk_in_turn(paths, values, 1, 4)

    def test_the_next_shard_is_opened_a_quarter_into_this_one(self):
        """Once the walk has queued this shard's last reads and passed a
        quarter of its keys (every family of a layer seen), the next shard
        is opened ahead: at the middle, as before, the engine ran dry while
        the caller opened it (bench/results/2026-12-04-h200-engine-trace.md)."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d, layers=4)
            with gdunlock.safe_open(paths[0], "pt", device="cpu") as f:
                keys = f.keys()
                for k in keys:
                    shape = f.get_slice(k).get_shape()
                    if len(shape) == 2:
                        f.get_slice(k)[rows(shape[0], 1, 4)]
                    if 4 * f._walk.next >= len(keys):
                        break
                self.assertLess(2 * f._walk.next, len(keys))
                self.assertIn(os.path.realpath(paths[1]), registry.made)

    def test_shards_linked_as_the_hub_cache_links_them(self):
        """huggingface_hub's cache names the shards in a snapshot folder,
        as links to files named by their hashes elsewhere: the next shard
        is found by the name the caller opened, and read ahead all the
        same."""
        with tempfile.TemporaryDirectory() as d:
            blobs, snapshot = os.path.join(d, "blobs"), os.path.join(d, "snapshot")
            os.mkdir(blobs)
            os.mkdir(snapshot)
            paths, values = numbered_shards(blobs)
            links = []
            for i, path in enumerate(paths):
                blob = os.path.join(blobs, f"{i:040x}")
                os.rename(path, blob)
                links.append(os.path.join(snapshot, os.path.basename(path)))
                os.symlink(os.path.relpath(blob, snapshot), links[-1])
            self.walk_in_turn(links, values, 1, 4)

    def test_ranks_one_after_another_read_each_byte_once(self):
        """Every rank of a 4-way split in one process, shard after shard:
        the next shard is read ahead with this rank's rows, also for the
        last shard's lm_head, a family the last walk of it asked with the
        rank before's (it was read twice, once with each)."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            for rank in range(4):
                self.walk_in_turn(paths, values, rank, 4)

    def test_what_nobody_claims_is_given_back(self):
        """The next shard made ahead is closed when another file is opened
        instead, or when nobody opens it in time."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            with gdunlock.safe_open(paths[0], "pt", device="cpu") as f:
                self.walk(f, values, 0, 2)
            made = registry.made[os.path.realpath(paths[1])][0]
            gdunlock.safe_open(paths[2], "pt", device="cpu").close()
            self.assertEqual(registry.made, {})
            self.assertTrue(made._closed)
            self.assertEqual(made._readers, {})
            with mock.patch.object(registry, "wait_s", 0.05), self.keeping():
                with gdunlock.safe_open(paths[0], "pt", device="cpu") as f:
                    self.walk(f, values, 1, 2)
                self.assertTrue(self.given_back_in_time(paths[1]))

    def test_one_thread_gives_back_for_every_walk(self):
        """What is made ahead waits for one long-lived thread to give it
        back, not a thread of its own per shard, started and cancelled
        in the caller's thread."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            started, new_thread, start = [], _thread.start_new_thread, threading.Thread.start
            with mock.patch.object(_thread, "start_new_thread",
                                   lambda *a: (started.append(a[0]), new_thread(*a))[1]), \
                    mock.patch.object(threading.Thread, "start",
                                      lambda t: (started.append(t.name), start(t))[1]):
                for rank in range(4):
                    self.walk_in_turn(paths, values, rank, 4)
            self.assertLessEqual(len(started), 1, started)

    def test_a_forked_child_gives_back_what_nobody_claims(self):
        """A child of fork() inherits what the parent made ahead but not the
        thread that gives it back: its own first shard made ahead starts
        its own, and is given back in time. The child runs under alarm()."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            with mock.patch.object(registry, "wait_s", 0.05):
                with self.keeping(), gdunlock.safe_open(paths[0], "pt", device="cpu") as f:
                    self.walk(f, values, 0, 2)
                self.assertIn(os.path.realpath(paths[1]), self.kept)

                def walk_the_next():
                    self.give_back()  # the parent's, inherited
                    with self.keeping():
                        with gdunlock.safe_open(paths[1], "pt", device="cpu") as f:
                            self.walk(f, values, 1, 2)
                        return self.given_back_in_time(paths[2])
                killed, status = in_forked_child(walk_the_next)
            self.assertEqual(killed, 0, f"the child died of signal {killed} (SIGALRM: it hung)")
            self.assertEqual(status, 0, "the child's shard made ahead was not given back in time")

    def test_a_next_shard_replaced_is_read_anew(self):
        """The next shard replaced (renamed over) after it was read ahead:
        safe_open of it reads the new file."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            with gdunlock.safe_open(paths[0], "pt", device="cpu") as f:
                self.walk(f, values, 0, 2)
            self.assertIn(os.path.realpath(paths[1]), registry.made)
            with tempfile.TemporaryDirectory() as other:
                _, new = numbered_shards(other)
                new = {k: v + 0.5 for k, v in new.items()}
                with gdunlock.safe_open(paths[1], "pt") as f:
                    names = f.keys()
                replacement = os.path.join(d, "replacement")
                write_safetensors(replacement, {k: ("F32", list(new[k].shape),
                                                    new[k].numpy().tobytes()) for k in names})
                os.rename(replacement, paths[1])
            with gdunlock.safe_open(paths[1], "pt", device="cpu") as f:
                want = self.walk(f, new, 0, 2)
                self.assertEqual(f.stats()["bytes_read"], want)

    def test_a_failure_reading_the_next_shard_ahead_stays_there(self):
        """Whatever goes wrong while the next shard is read ahead, the
        request of this file that set it off returns its tensor, and the
        next shard opens and reads as usual."""
        fill = walk.Walk.fill

        def failing(self_, dropped):
            if self_.last is None and self_.next_file_tried:  # the walk of a file opened ahead
                raise RuntimeError("injected")
            return fill(self_, dropped)
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            with mock.patch.object(walk.Walk, "fill", failing):
                with gdunlock.safe_open(paths[0], "pt", device="cpu") as f:
                    self.walk(f, values, 0, 2)
            self.assertEqual(registry.made, {})
            with gdunlock.safe_open(paths[1], "pt", device="cpu") as f:
                want = self.walk(f, values, 0, 2)
                self.assertEqual(f.stats()["bytes_read"], want)

    def test_a_shard_the_caller_holds_open_is_not_opened_again(self):
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            with gdunlock.safe_open(paths[1], "pt", device="cpu") as held:
                with gdunlock.safe_open(paths[0], "pt", device="cpu") as f:
                    self.walk(f, values, 0, 2)
                self.assertEqual(registry.made, {})
                want = self.walk(held, values, 0, 2)
                self.assertEqual(held.stats()["bytes_read"], want)


@unittest.skipIf(torch is None, "torch is not installed")
class ReadsAheadAnnounceTheirMemoryTest(ShardWalks, unittest.TestCase):
    """torch's caching allocator asks the driver for each block it lacks
    (bench/results/2026-12-02-h200-alloc-and-blocking-sync.md has what each
    costs), and one tensor at a time it asked
    dozens of times a rank: reads ahead announce the bytes they are about
    to allocate (Target.reserve), and on a GPU one block then serves the
    batch (tests/gpu/load_api.py counts the blocks). Here the announcements
    are recorded and matched with the allocations that follow them."""

    def setUp(self):
        super().setUp()
        self.events = []
        real = target.Target.empty
        for name, fn in (("reserve", lambda t, n: self.events.append(("reserve", n))),
                         ("empty", lambda t, n, *typed: (self.events.append(("empty", n)),
                                                         real(t, n, *typed))[1])):
            patcher = mock.patch.object(target.Target, name, fn, create=True)
            patcher.start()
            self.addCleanup(patcher.stop)

    def unannounced(self):
        """The allocations made outside an announced batch, checking that
        every announcement names the allocations that follow it, in
        order."""
        outside, left = [], []
        for kind, n in self.events:
            if kind == "reserve":
                self.assertEqual(left, [], "a batch allocated less than it announced")
                left = list(n)
            elif left:
                self.assertEqual(n, left.pop(0), "a batch allocated other than it announced")
            else:
                outside.append(n)
        self.assertEqual(left, [])
        return outside

    def test_ranks_walking_shards_announce_their_reads_ahead(self):
        """Only the two requests that teach a rank's walk its split are
        allocated on their own; the 72 others come in announced batches."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d)
            for rank in range(4):
                self.walk_in_turn(paths, values, rank, 4)
        allocations = sum(kind == "empty" for kind, _ in self.events)
        self.assertEqual(allocations, 4 * 20)
        self.assertLessEqual(len(self.unannounced()), 4 * 2, self.events)

    def test_a_confirmed_split_announces_the_rest_of_its_file_once(self):
        """A window of two parts takes the walk's keys a few at a time;
        once the split is confirmed, its parts of every key left are
        announced with the batch, in the order they are then allocated, and
        no batch after it announces again: one block for the file, where a
        block a batch cost a first rank a driver call each
        (bench/results/2026-12-04-h200-split-reserve.md)."""
        with tempfile.TemporaryDirectory() as d:
            paths, values = numbered_shards(d, n=1, layers=8)
            with gdunlock.safe_open(paths[0], "pt", device="cpu",
                                    readahead=2 * 64 * 48 * 4 // 4) as f:
                self.walk(f, values, 1, 4)
        reserves = [n for kind, n in self.events if kind == "reserve"]
        allocations = [n for kind, n in self.events if kind == "empty"]
        self.assertEqual(len(allocations), 8 * 3 + 2)  # and the lm_head
        self.assertLessEqual(len(reserves), 3, reserves)
        self.assertEqual(len(self.unannounced()), 2, self.events)
        self.assertEqual(reserves[-1], allocations[-len(reserves[-1]):])

    def test_the_iterator_announces_each_batch(self):
        sharded = os.path.join(os.path.dirname(__file__), "..", "fixtures", "safetensors",
                               "sharded")
        for budget in (1 << 30, 1000):
            self.events.clear()
            n = sum(t.numel() * t.element_size()
                    for _, t in gdunlock.weights_iterator(sharded, device="cpu",
                                                          memory_budget=budget))
            self.assertGreater(n, 0)
            self.assertEqual(self.unannounced(), [])


class ReserveBlockTest(unittest.TestCase):
    def test_the_block_holds_what_torch_takes_from_large_blocks(self):
        """The block reserved is the sum of the batch's tensors over 1 MiB,
        each rounded up to 512 bytes as torch rounds them (smaller ones come
        from torch's pool of small blocks); a batch of less than 32 MiB gets
        none, and neither does a GPU with less than twice the block free."""
        made = []

        class Cuda:
            free = 1 << 40

            @staticmethod
            def mem_get_info(device):
                return Cuda.free, 1 << 40

        fake = mock.Mock(uint8="u8", cuda=Cuda)
        fake.empty.side_effect = lambda n, dtype, device: made.append(n)
        gpu = target.Target.__new__(target.Target)
        gpu.torch, gpu.device, gpu._reserving = fake, "cuda:0", True
        mib = 1 << 20
        gpu.reserve([mib, mib + 1, 40 * mib, 4096])
        self.assertEqual(made, [mib + 512 + 40 * mib])
        gpu.reserve([30 * mib, 1000, mib])
        gpu.reserve([mib] * 64)
        self.assertEqual(len(made), 1)
        Cuda.free = 80 * mib
        gpu.reserve([41 * mib])
        self.assertEqual(len(made), 1)
        gpu._reserving = False
        Cuda.free = 1 << 40
        gpu.reserve([41 * mib])
        self.assertEqual(len(made), 1)


class SideStreamTest(unittest.TestCase):
    """Target.empty makes a caller's side stream finish before the engine
    writes the memory (its streams do not wait for that one). The current
    stream is read by id, as torch reads it, so that a result on the
    default stream makes no Stream object (every result is allocated
    there); a torch without that reader compares Stream objects."""

    def setUp(self):
        self.synced, self.asked, self.current = [], [], 0

    def gpu(self, id_reader):
        """A Target of cuda:3 over a fake torch whose current stream is
        self.current, with torch._C's reader of its id or without."""
        test = self

        class Stream:
            def __init__(self, stream_id):
                self.stream_id = stream_id

            def __eq__(self, other):
                return self.stream_id == other.stream_id

            def synchronize(self):
                test.synced.append(self.stream_id)

        class Cuda:
            @staticmethod
            def default_stream(device):
                return Stream(0)

            @staticmethod
            def current_stream(device):
                test.asked.append(device)
                return Stream(test.current)

        class C:
            @staticmethod
            def _cuda_getCurrentStream(ordinal):
                test.assertEqual(ordinal, 3)
                return (test.current, ordinal, 1)

        gpu = target.Target.__new__(target.Target)
        gpu.torch = mock.Mock(cuda=Cuda, _C=C if id_reader else object(), uint8="u8")
        gpu.target, gpu.device, gpu.ordinal, gpu._streams = \
            gdunlock._lib.TARGET_GPU, "cuda:3", 3, None
        return gpu

    def test_the_default_stream_costs_no_stream_object(self):
        gpu = self.gpu(id_reader=True)
        for _ in range(3):
            gpu.empty(64)
        self.assertEqual((self.synced, self.asked), ([], []))
        self.current = 7
        gpu.empty(64)
        self.assertEqual((self.synced, self.asked), ([7], ["cuda:3"]))

    def test_without_the_id_reader_streams_are_compared(self):
        gpu = self.gpu(id_reader=False)
        gpu.empty(64)
        self.assertEqual(self.synced, [])
        self.current = 5
        gpu.empty(64)
        self.assertEqual(self.synced, [5])


@unittest.skipIf(torch is None, "torch is not installed")
class DtypeTorchLacksTest(unittest.TestCase):
    def test_slices_come_back_as_their_bytes(self):
        """A dtype this torch lacks (F16 made to look so) comes back as raw
        bytes, whole and sliced, a strided slice included (it raised: a
        strided view of int16 cannot be viewed as bytes)."""
        from gdunlock import torch_bridge
        real = torch_bridge.torch_dtype
        t = torch.arange(48 * 10, dtype=torch.float16).reshape(48, 10)
        plans.forget()
        self.addCleanup(plans.forget)
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.object(torch_bridge, "torch_dtype",
                                  lambda name: None if name == "F16" else real(name)):
            path = os.path.join(d, "m.safetensors")
            write_safetensors(path, {"w": ("F16", [48, 10], t.numpy().tobytes())})
            with gdunlock.safe_open(path, "pt", device="cpu") as f:
                for index in (None, (slice(3, 9),), (slice(None), slice(2, 7)), 5,
                              (slice(0, 48, 3), 4), (slice(1, 40, 5), slice(0, 10, 2))):
                    got = f.get_tensor("w") if index is None else f.get_slice("w")[index]
                    want = t if index is None else t[index]
                    self.assertEqual(got.dtype, torch.uint8, index)
                    self.assertEqual(got.numpy().tobytes(),
                                     want.contiguous().numpy().tobytes(), index)


@unittest.skipIf(torch is None, "torch is not installed")
class SubByteTest(unittest.TestCase):
    def make(self, d):
        path = os.path.join(d, "fp4.safetensors")
        raw = bytes(range(16))  # F4 [4, 8]: 4 bytes a row
        write_safetensors(path, {"w": ("F4", [4, 8], raw), "odd": ("F4", [2, 3], raw[:3]),
                                 "six": ("F6_E2M3", [2, 4], raw[:6])})
        return path, raw

    def test_rows_and_byte_aligned_columns_in_elements(self):
        with tempfile.TemporaryDirectory() as d:
            path, raw = self.make(d)
            with gdunlock.safe_open(path, "pt") as f:
                whole = f.get_tensor("w")
                row = f.get_slice("w")[1]
                self.assertEqual(row.reshape(-1).view(torch.uint8).tolist(), list(raw[4:8]))
                cols = f.get_slice("w")[:, 2:6]  # elements 2..5: bytes 1..2 of each row
                self.assertEqual(cols.reshape(-1).view(torch.uint8).tolist(),
                                 [b for r in range(4) for b in raw[4 * r + 1: 4 * r + 3]])
                self.assertEqual(whole.reshape(-1).view(torch.uint8).tolist(), list(raw))
                six = f.get_slice("six")[1]  # 4 six-bit elements: 3 bytes
                self.assertEqual(six.reshape(-1).view(torch.uint8).tolist(), list(raw[3:6]))

    def test_cuts_inside_a_byte_are_refused_by_name(self):
        with tempfile.TemporaryDirectory() as d:
            path, _ = self.make(d)
            with gdunlock.safe_open(path, "pt") as f:
                for key, index in (("w", (slice(None), slice(1, 4))), ("w", (0, 3)),
                                   ("odd", (0,))):
                    with self.assertRaises(gdunlock.SliceError) as ctx:
                        f.get_slice(key)[index]
                    self.assertIn("bit", str(ctx.exception))
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                list(gdunlock.weights_iterator(path, device="cpu", rank=1, world_size=8,
                                               shard={"w": 1}))
            self.assertIn("cannot shard w", str(ctx.exception))
            got = dict(gdunlock.weights_iterator(path, device="cpu", rank=1, world_size=2,
                                                 shard={"^w$": 0}))
            self.assertEqual(got["w"].reshape(-1).view(torch.uint8).tolist(), list(range(8, 16)))


@unittest.skipIf(torch is None, "torch is not installed")
class ErrorsBelongToTheirCallTest(unittest.TestCase):
    def test_a_damaged_next_shard_fails_only_its_own_tensors(self):
        """b's shard is cut short after the open: its read ahead fails, and
        only get_tensor("b") says so."""
        with tempfile.TemporaryDirectory() as d:
            write_safetensors(os.path.join(d, "a.safetensors"),
                              {"a": ("U8", [8], bytes(8)), "a2": ("U8", [8], bytes(8))})
            write_safetensors(os.path.join(d, "b.safetensors"), {"b": ("U8", [8], bytes(8))})
            index = os.path.join(d, "model.safetensors.index.json")
            with open(index, "w") as out:
                out.write('{"weight_map": {"a": "a.safetensors", "a2": "a.safetensors", '
                          '"b": "b.safetensors"}}')
            with gdunlock.safe_open(index, "pt") as f:
                os.truncate(os.path.join(d, "b.safetensors"), 20)
                self.assertEqual(f.get_tensor("a").numel(), 8)
                self.assertEqual(f.get_tensor("a2").numel(), 8)
                with self.assertRaises(gdunlock.GdunlockError):
                    f.get_tensor("b")


@unittest.skipIf(torch is None, "torch is not installed")
class ValidatedFileTest(unittest.TestCase):
    def test_a_file_replaced_by_rename_is_not_read(self):
        """safe_open and weights_iterator read the file whose header they
        checked, not whatever the path names by the time the bytes move
        (issue 22, item 1: the old reader opened the path at its first read
        and returned the new file's bytes at the old header's offsets). The
        iterator checks a file when it reaches it, and from then on reads
        that one."""
        with tempfile.TemporaryDirectory() as d:
            path, other = os.path.join(d, "m.safetensors"), os.path.join(d, "new.safetensors")
            zeros, nines = struct.pack("<4f", 0, 0, 0, 0), struct.pack("<4f", 9, 9, 9, 9)
            write_safetensors(path, {"a": ("F32", [4], zeros), "b": ("F32", [4], zeros)})
            write_safetensors(other, {"a": ("F32", [4], nines), "b": ("F32", [4], nines)})
            f = gdunlock.safe_open(path, "pt")
            it = gdunlock.weights_iterator(path, device="cpu", memory_budget=0)
            self.assertEqual(next(it)[1].tolist(), [0.0] * 4)
            os.rename(other, path)
            self.assertEqual(f.get_tensor("a").tolist(), [0.0] * 4)
            self.assertEqual(next(it)[1].tolist(), [0.0] * 4)
            f.close()
            it.close()


@unittest.skipIf(torch is None, "torch is not installed")
class ReaderBoundsTest(unittest.TestCase):
    def test_open_files_stay_within_the_bound(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i in range(6):
                p = os.path.join(d, f"s{i}.safetensors")
                write_safetensors(p, {f"t{i}": ("U8", [16], bytes([i]) * 16)})
                paths.append(p)
            r = reader.RangeReader(gdunlock.reader.TARGET_HOST, 0, max_open=2)
            ckpts = [gdunlock.Checkpoint(p) for p in paths]
            buf = torch.empty(16, dtype=torch.uint8)
            try:
                for round_ in range(2):
                    for i, (p, c) in enumerate(zip(paths, ckpts)):
                        r.submit(c.file_ref(0), [(os.path.getsize(p) - 16, 16, buf.data_ptr())],
                                 keep=buf).wait()
                        self.assertEqual(buf[0].item(), i)
                        self.assertLessEqual(len(r._files), 2)
            finally:
                r.close()
                for c in ckpts:
                    c.close()

    def test_a_close_between_the_check_and_the_read_keeps_no_lease(self):
        """close() landing after get_tensor checked that the file is open
        but before it took the reader (issue 22, item 11: the old reader was
        made anew there, and its engine lease was never given back)."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            write_safetensors(path, {"a": ("U8", [16], bytes(16))})
            f = gdunlock.safe_open(path, "pt")
            check = f._info

            def check_then_close(name):
                info = check(name)
                f.close()
                return info
            f._info = check_then_close
            with self.assertRaises(gdunlock.GdunlockError):
                f.get_tensor("a")
            gdunlock.release_engines()  # BUSY if a lease were left

    def test_close_racing_reads_keeps_no_lease(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            write_safetensors(path, {f"t{i:03d}": ("U8", [4096], bytes(4096)) for i in range(200)})
            for _ in range(5):
                f = gdunlock.safe_open(path, "pt")
                stop = threading.Event()

                def work():
                    for k in f.keys():
                        try:
                            f.get_tensor(k)
                        except gdunlock.GdunlockError:
                            return

                t = threading.Thread(target=work)
                t.start()
                f.close()
                t.join()
                stop.set()
            gdunlock.release_engines()  # BUSY if a lease were left


@unittest.skipIf(torch is None, "torch is not installed")
class IteratorOptionsTest(unittest.TestCase):
    def test_select_reads_no_byte_of_a_skipped_tensor(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "moe.safetensors")
            write_safetensors(path, {f"experts.{e}.w": ("U8", [1000], bytes([e]) * 1000)
                                     for e in range(8)})
            it = gdunlock.weights_iterator(path, device="cpu", select=r"experts\.[0-3]\.")
            got = dict(it)
            self.assertEqual(sorted(got), [f"experts.{e}.w" for e in range(4)])
            # the four small tensors share one request (submit_group)
            self.assertEqual(it.stats(), {"bytes_read": 4000, "requests": 1, "skipped": 4})
            it = gdunlock.weights_iterator(path, device="cpu", select=lambda n: "7" in n)
            self.assertEqual([n for n, _ in it], ["experts.7.w"])

    def test_progress_callback_and_arguments(self):
        seen = []
        dict(gdunlock.weights_iterator(os.path.join(os.path.dirname(__file__), "..",
                                                    "fixtures", "safetensors", "sharded"),
                                       device="cpu",
                                       progress=lambda done, total, name: seen.append(
                                           (done, total))))
        self.assertEqual(seen[-1][0], seen[-1][1])
        self.assertEqual(len(seen), 12)
        for bad in ({"world_size": 2.5}, {"rank": True, "world_size": 2},
                    {"memory_budget": None}, {"world_size": 0}):
            with self.assertRaises(ValueError):
                gdunlock.weights_iterator("x.safetensors", device="cpu", **bad)

    def test_progress_bar_counts_every_byte(self):
        """progress=True: tqdm's bar reaches the bytes read (a bar of total
        0 is falsy in tqdm, and one tested for truth never grew)."""
        try:
            import tqdm  # noqa: F401
        except ImportError:
            self.skipTest("tqdm is not installed")
        import io
        import contextlib
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            it = gdunlock.weights_iterator(os.path.join(os.path.dirname(__file__), "..",
                                                        "fixtures", "safetensors", "sharded"),
                                           device="cpu", progress=True)
            bar = it._progress.bar
            dict(it)
        self.assertEqual(bar.n, it._progress.total)
        self.assertGreater(bar.n, 0)

    def test_every_shard_is_read_from_its_own_file(self):
        """With a budget smaller than a shard, a shard's checkpoint is freed
        before the next one opens; the next one got its id(), the reader's
        key for the file it keeps open, and its tensors were read through
        the first shard's descriptor (position_ids and scale came back
        wrong, embed_tokens short)."""
        folder = os.path.join(os.path.dirname(__file__), "..", "fixtures", "safetensors",
                              "sharded")
        ref = {}
        for name in sorted(os.listdir(folder)):
            if name.endswith(".safetensors"):
                ref.update(file_bytes(os.path.join(folder, name)))
        for budget in (1, 1000, 1 << 30):
            got = {name: t.reshape(-1).view(torch.uint8).numpy().tobytes()
                   for name, t in gdunlock.weights_iterator(folder, device="cpu",
                                                            memory_budget=budget)}
            self.assertEqual(got, {k: v[2] for k, v in ref.items()}, budget)

    def test_freed_checkpoints_leave_their_keys_unused(self):
        from gdunlock.checkpoint import Checkpoint
        path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "safetensors",
                            "sharded", "model-00001-of-00002.safetensors")
        keys = []
        for _ in range(20):
            ckpt = Checkpoint(path)
            keys.append(ckpt.file_ref(0).key)
            ckpt.close()
            del ckpt
        self.assertEqual(len(set(keys)), 20)

    def test_a_file_named_twice_is_read_once(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            write_safetensors(path, {"a": ("U8", [4], bytes(4))})
            os.symlink(path, os.path.join(d, "link.safetensors"))
            names = [n for n, _ in gdunlock.weights_iterator(
                [path, os.path.join(d, "link.safetensors"), d], device="cpu")]
            self.assertEqual(names, ["a"])


if __name__ == "__main__":
    unittest.main()
