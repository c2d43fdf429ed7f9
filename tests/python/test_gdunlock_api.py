"""CPU tests of the ecosystem API: safe_open (keys, metadata, get_tensor,
get_slice), weights_iterator (ranks, budget), patch(), the byte ranges a
slice reads, and the engine-backed range reader. The torch parts need torch
(skipped without it); the rest runs on the standard library alone."""
import ctypes
import itertools
import json
import math
import os
import random
import struct
import sys
import tempfile
import threading
import types
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import FIX, SHARDED, SMALL, torch  # noqa: E402
from _fixtures import reference as _reference  # noqa: E402

import gdunlock  # noqa: E402
from gdunlock import iterator, plans, reader, slicing, target  # noqa: E402


def setUpModule():
    # Host memory stands in for a GPU here: the engine reads into it, where
    # safe_open's CPU default would map the file.
    gdunlock.safe_open.default_backend = "pread"


def tearDownModule():
    gdunlock.safe_open.default_backend = "mmap"


def file_bytes(path):
    """{name: (dtype, shape as a list, bytes)}."""
    return {k: (d, list(s), b) for k, (d, s, b) in _reference(path).items()}


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, shape, bytes)}, written as the reference does."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset,
                                                                          offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class PlanSliceTest(unittest.TestCase):
    """plan_slice's reads hold the index's elements and only the smallest
    box around them, for random basic indexes."""

    def covered(self, shape, index):
        """The flat element indexes tensor[index] takes (pure Python)."""
        items = slicing.normalize(index, len(shape))
        per_dim, d = [], 0
        for item in items:
            if item is None:
                continue
            n = shape[d]
            if isinstance(item, int):
                per_dim.append([item + n if item < 0 else item])
            else:
                per_dim.append(list(range(*item.indices(n))))
            d += 1
        strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
        return {sum(i * s for i, s in zip(combo, strides))
                for combo in itertools.product(*per_dim)}

    def test_random_indexes(self):
        rng = random.Random(7)
        for shape in ([5], [4, 6], [3, 4, 5], [2, 0, 3], [7, 1, 3], [2, 3, 4, 5]):
            for _ in range(200):
                index = []
                for _ in range(rng.randint(0, len(shape))):
                    r = rng.random()
                    if r < 0.25:
                        index.append(rng.randint(0, 1))
                    elif r < 0.3:
                        index.append(None)
                    else:
                        index.append(slice(rng.choice([None, -3, 0, 1, 2]),
                                           rng.choice([None, -1, 1, 3, 9]),
                                           rng.choice([None, 1, 2])))
                index = tuple(index)
                try:
                    runs, box, post = slicing.plan_slice(shape, 32, index)
                except gdunlock.SliceError:  # an int into a dimension too small
                    continue
                read = set()
                for offset, length in runs:
                    self.assertEqual(offset % 4, 0)
                    read |= set(range(offset // 4, (offset + length) // 4))
                need = self.covered(shape, index)
                self.assertTrue(need <= read, (shape, index))
                self.assertEqual(len(read), math.prod(box), (shape, index))
                self.assertEqual(sum(n for _, n in runs), 4 * math.prod(box))

    def test_tensor_parallel_splits_read_only_their_bytes(self):
        shape = [8, 12]
        for world in (2, 4, 8):
            for dim in (0, 1):
                total = 0
                for rank in range(world):
                    index = iterator.rank_index(shape, dim, rank, world)
                    runs, box, _ = slicing.plan_slice(shape, 16, index)
                    total += sum(n for _, n in runs)
                    # Rows: one run; columns: one run per row.
                    self.assertEqual(len(runs), (1 if dim == 0 else shape[0]) if runs else 0)
                self.assertEqual(total, 8 * 12 * 2)

    def test_the_engine_reads_the_runs_as_a_box(self):
        # The engine reads a plan's runs as the box Runs.box() gives
        # (gdu_io_submit_box): the extents the library makes of that box are
        # the runs offsets() lists, in order, memory one run after another.
        lib = gdunlock._lib.lib()
        rng = random.Random(21)
        for _ in range(300):
            shape = [rng.randint(1, 6) for _ in range(rng.randint(1, 4))]
            index = tuple(slice(rng.randint(0, n - 1), rng.randint(1, n) + n) for n in shape)
            runs = slicing.plan_slice(shape, 16, index)[0]
            at, address = rng.randint(0, 1 << 20), 1 << 40
            counts, strides, nd, length = runs.box()
            self.assertIs(runs.box(), runs.box())  # made once per plan
            ext = (gdunlock._lib.IoExtent * max(len(runs), 1))()
            self.assertEqual(lib.gdu_io_extents_box(ext, max(len(runs), 1), runs.base + at,
                                                    counts, strides, nd, length, address), 0)
            self.assertEqual([(ext[i].offset, ext[i].length) for i in range(len(runs))],
                             [(o + at, n) for o, n in runs], (shape, index))
            self.assertEqual([ext[i].mem for i in range(len(runs))],
                             [address + i * runs.length for i in range(len(runs))])

    def test_refused_indexes(self):
        # a second Ellipsis moves on past the dimensions the first spans, as
        # torch's does: a new axis after it is out of range
        for index in (5, -6, (0, 0), (slice(None), slice(None, None, -1)),
                      (Ellipsis, Ellipsis, None)):
            with self.assertRaises(gdunlock.SliceError):
                slicing.plan_slice([5], 8, index)
        self.assertEqual(slicing.plan_slice([5], 8, (Ellipsis, Ellipsis))[0], [(0, 5)])
        with self.assertRaises(IndexError):  # SliceError is also an IndexError
            slicing.plan_slice([5], 8, 7)
        for index in ([0, 1], (slice(None), [1]), 1.5):
            with self.assertRaises(TypeError):
                slicing.plan_slice([5, 2], 8, index)
        self.assertEqual(slicing.plan_slice([], 32, ())[0], [(0, 4)])
        self.assertEqual(slicing.plan_slice([], 32, Ellipsis)[0], [(0, 4)])

    def test_rank_index_is_torch_chunk(self):
        for n in (0, 1, 5, 8, 9):
            for world in (1, 2, 3, 4, 8):
                parts = [slicing.plan_slice([n], 8, iterator.rank_index([n], 0, r, world))[1][0]
                         for r in range(world)]
                size = math.ceil(n / world) if n else 0
                want = [max(0, min(size, n - r * size)) for r in range(world)]
                self.assertEqual(parts, want, (n, world))


class RangeReaderTest(unittest.TestCase):
    def test_host_reads_are_byte_exact_and_counted(self):
        ref = file_bytes(SMALL)
        c = gdunlock.Checkpoint(SMALL)
        infos = c.tensors()
        r = reader.RangeReader(gdunlock._lib.TARGET_HOST, 0)
        try:
            pending = []
            for t in infos:
                buf = ctypes.create_string_buffer(max(t.nbytes, 1))
                p = r.submit(c.file_ref(0), [(t.file_offset, t.nbytes, ctypes.addressof(buf))]
                             if t.nbytes else [])
                pending.append((t, buf, p))
            for t, buf, p in pending:
                p.wait()
                self.assertEqual(buf.raw[:t.nbytes], ref[t.name][2], t.name)
            self.assertEqual(r.bytes_read, sum(t.nbytes for t in infos))
            # The lease keeps release_engines from pulling the engine away.
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                gdunlock.release_engines()
            self.assertEqual(ctx.exception.code, "GDU_ST_ERR_BUSY")
        finally:
            r.close()
            c.close()
        gdunlock.release_engines()

    def test_close_waits_out_a_wait_another_thread_runs(self):
        """A thread waiting for a read when another closes the reader: the
        close refuses new reads and closes the file only once that wait has
        returned. Before, close() skipped a read already taken for waiting
        and closed the file and returned the engine under the wait, which
        then crashed the process (1 in 60 runs of a racing test under load
        on the development machine)."""
        c = gdunlock.Checkpoint(SMALL)
        t = c.tensors()[0]
        r = reader.RangeReader(gdunlock._lib.TARGET_HOST, 0)
        events, in_wait, let_go = [], threading.Event(), threading.Event()
        real = r._lib

        class Lib:  # the library, with the wait held until the close has begun
            def __getattr__(self, name):
                return getattr(real, name)

            def gdu_io_wait(self, *args):
                in_wait.set()
                let_go.wait(10)
                rc = real.gdu_io_wait(*args)
                events.append("wait returned")
                return rc

            def gdu_io_close(self, f):
                events.append("file closed")
                return real.gdu_io_close(f)

        r._lib = Lib()
        buf = ctypes.create_string_buffer(max(t.nbytes, 1))
        p = r.submit(c.file_ref(0), [(t.file_offset, t.nbytes, ctypes.addressof(buf))])
        waiter = threading.Thread(target=p.wait)
        waiter.start()
        self.assertTrue(in_wait.wait(10))
        closer = threading.Thread(target=r.close)
        closer.start()
        for _ in range(1000):  # until the close has begun (or, as before, closed the file)
            if getattr(r, "_closing", False) or events:
                break
            threading.Event().wait(0.01)
        with self.assertRaises(gdunlock.GdunlockError):
            r.submit(c.file_ref(0), [(t.file_offset, t.nbytes, ctypes.addressof(buf))])
        let_go.set()
        waiter.join(10)
        closer.join(10)
        c.close()
        self.assertEqual(events, ["wait returned", "file closed"])
        gdunlock.release_engines()  # BUSY if a lease were left

    def test_a_read_submitted_before_its_memory(self):
        """submit_runs_deferred queues a read whose memory comes later: a
        close from another thread waits while it is being allocated
        (closing under it, the placement would name a request the close
        had freed), the bytes then arrive; a cancelled one leaves nothing
        out, neither can be placed twice, and one that no thread is
        allocating for (its thread stopped by an interrupt) is cancelled by
        the close instead of waited for."""
        ref = file_bytes(SMALL)
        c = gdunlock.Checkpoint(SMALL)
        t = max(c.tensors(), key=lambda t: t.nbytes)
        runs = plans.plan_tensor(t, None).runs
        r = reader.RangeReader(gdunlock._lib.TARGET_HOST, 0)
        cancelled = r.submit_runs_deferred(c.file_ref(0), runs, t.file_offset)
        cancelled.cancel()
        self.assertEqual(len(r._pending), 0)
        with self.assertRaises(gdunlock.GdunlockError):
            cancelled.place(0, None)
        p = r.submit_runs_deferred(c.file_ref(0), runs, t.file_offset)
        allocating, closing = threading.Event(), threading.Event()
        closer = threading.Thread(target=r.close)
        buf = ctypes.create_string_buffer(t.nbytes)

        def allocate():
            allocating.set()
            closing.wait(10)
            closer.join(0.3)
            self.assertTrue(closer.is_alive(), "the close did not wait for the placement")
            return ctypes.addressof(buf), buf
        placing = threading.Thread(target=p.fill, args=(allocate,))
        placing.start()
        allocating.wait(10)
        closer.start()
        closing.set()
        placing.join(10)
        closer.join(10)
        self.assertFalse(closer.is_alive())
        self.assertEqual(buf.raw, ref[t.name][2])
        with self.assertRaises(gdunlock.GdunlockError):
            p.place(ctypes.addressof(buf), buf)
        r = reader.RangeReader(gdunlock._lib.TARGET_HOST, 0)
        left = r.submit_runs_deferred(c.file_ref(0), runs, t.file_offset)
        closer = threading.Thread(target=r.close)
        closer.start()
        closer.join(10)
        self.assertFalse(closer.is_alive(), "the close waited for a read nobody places")
        with self.assertRaises(gdunlock.GdunlockError):
            left.place(ctypes.addressof(buf), buf)
        c.close()
        gdunlock.release_engines()  # BUSY if a lease were left

    def test_short_file_is_an_error(self):
        r = reader.RangeReader(gdunlock._lib.TARGET_HOST, 0)
        c = gdunlock.Checkpoint(SMALL)
        try:
            buf = ctypes.create_string_buffer(64)
            size = os.path.getsize(SMALL)
            p = r.submit(c.file_ref(0), [(size - 8, 64, ctypes.addressof(buf))])
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                p.wait()
            self.assertEqual(ctx.exception.code, "GDU_ST_ERR_IO")
        finally:
            r.close()
            c.close()


def engine_workers():
    """The I/O engine worker threads of this process (named gdu-io-N)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return sum(name.startswith("gdu-io-") for name in names)


class PrepareTest(unittest.TestCase):
    """gdunlock.prepare() starts the engine the loads then use, ahead of them."""

    def setUp(self):
        gdunlock.release_engines()  # no engine kept: each test starts from none

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_started_engine_is_the_one_the_load_uses(self):
        self.assertEqual(engine_workers(), 0)
        self.assertTrue(gdunlock.prepare("cpu").wait(timeout=60))
        started = engine_workers()
        self.assertEqual(started, gdunlock._lib.lib().gdu_io_default_workers(),
                         "prepare() left no engine running")
        ref = file_bytes(SMALL)
        with gdunlock.safe_open(SMALL, framework="pt", device="cpu") as f:
            for k in f.keys():
                got = f.get_tensor(k).reshape(-1).view(torch.uint8).numpy().tobytes()
                self.assertEqual(got, ref[k][2], k)
            self.assertEqual(engine_workers(), started, "the load made an engine of its own")

    def test_returns_before_the_engine_is_started(self):
        p = gdunlock.prepare("cpu")
        self.assertIsInstance(p, gdunlock.Preparation)
        self.assertTrue(p.wait(timeout=60))
        self.assertTrue(p.done())

    def test_an_engine_that_cannot_start_raises_from_wait(self):
        p = gdunlock.prepare(1023)  # an ordinal no machine has
        with self.assertRaises(gdunlock.GdunlockError) as ctx:
            p.wait(timeout=60)
        self.assertIn("GPU 1023", ctx.exception.message)
        self.assertEqual(engine_workers(), 0)

    def test_a_device_it_cannot_read_into_raises_at_once(self):
        with self.assertRaises(ValueError):
            gdunlock.prepare("tpu:0")


class PatchTest(unittest.TestCase):
    """patch() replaces safetensors' functions and every name bound to them
    (a stand-in safetensors here; tests/gpu/load_api.py uses the real one
    with transformers)."""

    def setUp(self):
        self.saved = {k: sys.modules.get(k) for k in ("safetensors", "safetensors.torch",
                                                      "consumer_mod")}
        st = types.ModuleType("safetensors")
        st_torch = types.ModuleType("safetensors.torch")
        st.safe_open = lambda *a, **k: "original safe_open"
        st.SafetensorError = type("SafetensorError", (Exception,), {})
        st_torch.load_file = lambda *a, **k: "original load_file"
        st.torch = st_torch
        consumer = types.ModuleType("consumer_mod")
        consumer.safe_open = st.safe_open  # as `from safetensors import safe_open`
        consumer.safe_load_file = st_torch.load_file
        sys.modules.update({"safetensors": st, "safetensors.torch": st_torch,
                            "consumer_mod": consumer})
        self.st, self.consumer = st, consumer

    def tearDown(self):
        gdunlock.unpatch()
        for k, v in self.saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v

    def test_patch_and_unpatch(self):
        original = self.st.safe_open
        self.assertEqual(gdunlock.patch(), 4)
        dropin = self.st.safe_open
        self.assertIsNot(dropin, original)
        self.assertIs(self.consumer.safe_open, dropin)
        self.assertIs(self.consumer.safe_load_file, self.st.torch.load_file)
        self.assertEqual(gdunlock.patch(), 0)  # idempotent
        # An option gdunlock has not: safetensors' own function answers.
        from gdunlock import patching
        self.assertEqual(dropin("x.safetensors", framework="pt", device="cpu", mystery=1),
                         "original safe_open")
        self.assertEqual(patching.fallbacks[-1], ["mystery"])
        self.assertEqual(self.st.torch.load_file("x.safetensors", device="cpu", mystery=1),
                         "original load_file")
        # backend= (transformers passes it) goes to gdunlock: here the file is missing.
        with self.assertRaises(gdunlock.GdunlockError):
            dropin("/no/such.safetensors", framework="pt", device="cpu", backend="mmap")
        gdunlock.unpatch()
        self.assertIs(self.st.safe_open, original)
        self.assertIs(self.consumer.safe_open, original)


@unittest.skipIf(torch is None, "torch is not installed")
class SafeOpenTest(unittest.TestCase):
    def raw(self, t):
        return t.reshape(-1).view(torch.uint8).numpy().tobytes()

    def test_interface_matches_the_file(self):
        ref = file_bytes(SMALL)
        with gdunlock.safe_open(SMALL, framework="pt", device="cpu") as f:
            self.assertEqual(f.keys(), sorted(ref))
            self.assertEqual(f.metadata(), {"format": "pt", "source": "make_fixtures.py"})
            self.assertEqual(len(f.offset_keys()), len(ref))
            for k in f.keys():
                t = f.get_tensor(k)
                self.assertEqual(t.device.type, "cpu")
                self.assertEqual(self.raw(t), ref[k][2], k)
                if gdunlock.torch_bridge.torch_dtype(ref[k][0]) is not None and ref[k][0] != "F4":
                    self.assertEqual(list(t.shape), ref[k][1], k)
            self.assertEqual(f.get_slice("scale").get_shape(), [])
            self.assertEqual(f.get_slice("scale").get_dtype(), "F64")
            # Each key read once (read ahead, never twice).
            self.assertEqual(f.stats()["bytes_read"], sum(len(v[2]) for v in ref.values()))
        with gdunlock.safe_open(os.path.join(FIX, "empty.safetensors"), "pt") as f:
            self.assertIsNone(f.metadata())
            self.assertEqual(f.keys(), [])

    def test_errors_are_gdunlock_errors(self):
        with self.assertRaises(gdunlock.GdunlockError):
            gdunlock.safe_open(SMALL, framework="tf")
        with self.assertRaises(gdunlock.GdunlockError) as ctx:
            gdunlock.safe_open(os.path.join(FIX, "hostile/hole.safetensors"), "pt")
        self.assertEqual(ctx.exception.code, "GDU_ST_ERR_HOLE")
        with gdunlock.safe_open(os.path.join(FIX, "hostile/hole.safetensors"), "pt",
                                lenient=True) as f:
            self.assertEqual(self.raw(f.get_tensor("b")),
                             file_bytes(os.path.join(FIX, "hostile/hole.safetensors"))["b"][2])
        f = gdunlock.safe_open(SMALL, "pt")
        with self.assertRaises(gdunlock.GdunlockError) as ctx:
            f.get_tensor("nope")
        self.assertEqual(ctx.exception.code, "GDU_ST_ERR_NOT_FOUND")
        with self.assertRaises(gdunlock.SliceError):
            f.get_slice("model.embed_tokens.weight")[64]
        f.close()
        with self.assertRaises(gdunlock.GdunlockError):
            f.keys()
        with self.assertRaises(gdunlock.GdunlockError) as ctx:
            gdunlock.safe_open(SMALL, "pt", device=999).get_tensor("scale")
        self.assertIn(ctx.exception.code, ("GDU_ST_ERR_NO_CUDA", "GDU_ST_ERR_ENGINE"))

    def record_reads(self):
        """From now on until the test ends, self.events records each read
        queued, placed or cancelled, each allocation (Target.empty, which
        self.no_memory makes fail) and each block announced (reserve);
        small whole tensors read into host memory are not grouped (their
        memory would come first: submit_group), as on a GPU."""
        self.events = events = []
        real_queue, real_place = reader.RangeReader._queue, reader.RangeReader._place
        self.real_empty = target.Target.empty

        def queue(self, *args, **kw):
            events.append("queue")
            return real_queue(self, *args, **kw)

        def place(self, pending, address):
            events.append("cancel" if address is None else "place")
            return real_place(self, pending, address)

        for patcher in (mock.patch.object(reader.RangeReader, "_queue", queue),
                        mock.patch.object(reader.RangeReader, "_place", place),
                        mock.patch.object(plans, "GROUP_TENSOR", 0),
                        mock.patch.object(target.Target, "empty",
                                          lambda t, *a, **kw: self.recorded_empty(t, *a, **kw)),
                        mock.patch.object(target.Target, "reserve",
                                          lambda _, sizes: events.append("reserve"))):
            patcher.start()
            self.addCleanup(patcher.stop)

    def recorded_empty(self, *args, **kw):
        """Target.empty(*args), recorded."""
        self.events.append("empty")
        return self.real_empty(*args, **kw)

    def no_memory(self, *args, **kw):
        """Target.empty(*args) failing for want of memory, recorded."""
        self.events.append("empty")
        raise gdunlock.GdunlockError("GDU_ST_ERR_DEVICE_MEMORY", "out of memory (test)")

    def test_each_read_is_queued_before_its_memory(self):
        """Every read is queued before torch is asked for its memory and
        given it after, so that the allocation overlaps the engine's reads
        (a process's first blocks come slowly from the driver:
        bench/results/2026-12-04-h200-engine-trace.md): at every point of
        the walk at least as many reads were queued as allocated, and
        allocated as placed; a batch read ahead is queued whole before its
        block is announced to torch's allocator."""
        self.record_reads()
        ref = file_bytes(SMALL)
        with gdunlock.safe_open(SMALL, "pt") as f:
            for k in f.keys():
                self.assertEqual(self.raw(f.get_tensor(k)), ref[k][2], k)
        events, counts = self.events, {"queue": 0, "empty": 0, "place": 0}
        for at, event in enumerate(events):
            if event == "reserve":  # after its batch's reads, before their memory
                self.assertEqual((events[at - 1], events[at + 1]), ("queue", "empty"))
                continue
            counts[event] += 1
            self.assertGreaterEqual(counts["queue"], counts["empty"], events[:at + 1])
            self.assertGreaterEqual(counts["empty"], counts["place"], events[:at + 1])
        self.assertIn("reserve", events)
        self.assertGreater(counts["queue"], 3)
        self.assertEqual(counts["queue"], counts["place"])

    def test_a_failed_allocation_cancels_its_read(self):
        """The allocation's error reaches the caller and the read is
        cancelled, nothing left out to hold the close."""
        self.record_reads()
        with mock.patch.object(target.Target, "empty",
                               lambda t, *a, **kw: self.no_memory(t, *a, **kw)):
            f = gdunlock.safe_open(SMALL, "pt")
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                f.get_tensor(f.keys()[0])
            self.assertEqual(ctx.exception.code, "GDU_ST_ERR_DEVICE_MEMORY")
            readers = list(f._readers.values())
            self.assertTrue(readers)
            for r in readers:
                self.assertEqual(len(r._pending), 0)
            closer = threading.Thread(target=f.close)
            closer.start()
            closer.join(10)
            self.assertFalse(closer.is_alive())
        self.assertEqual(self.events, ["queue", "empty", "cancel"])

    def test_a_failed_allocation_ahead_closes_the_window(self):
        """The third allocation, inside the batch read ahead after the
        first tensor, fails: the reads queued after it are cancelled, the
        window closes, and every tensor still reads right."""
        self.record_reads()
        ref, allocations, events = file_bytes(SMALL), [], self.events

        def third_fails(*args, **kw):
            allocations.append(args)
            if len(allocations) == 3:
                return self.no_memory(*args, **kw)
            return self.recorded_empty(*args, **kw)
        with mock.patch.object(target.Target, "empty", third_fails), \
                gdunlock.safe_open(SMALL, "pt") as f:
            keys = f.keys()
            self.assertEqual(self.raw(f.get_tensor(keys[0])), ref[keys[0]][2])
            queued = events.count("queue")
            self.assertGreater(queued, 3, events)
            self.assertEqual(events.count("place") + events.count("cancel"), queued)
            self.assertEqual(events.count("place"), 2, events)
            self.assertEqual(f._walk.window, 0)
            for r in f._readers.values():
                self.assertFalse(any(p.unplaced for p in r._pending))
            for k in keys:
                self.assertEqual(self.raw(f.get_tensor(k)), ref[k][2], k)

    def test_slices_equal_indexing_the_whole(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.safetensors")
            values = {"w": torch.arange(6 * 10 * 4, dtype=torch.int32).reshape(6, 10, 4),
                      "b": torch.arange(7, dtype=torch.int16), "s": torch.tensor(3.5)}
            write_safetensors(path, {k: ({torch.int32: "I32", torch.int16: "I16",
                                          torch.float32: "F32"}[v.dtype], list(v.shape),
                                         self.raw(v)) for k, v in values.items()})
            indexes = [(slice(1, 4),), (slice(None), slice(2, 8, 3)), (Ellipsis, 1),
                       (-1, None, slice(None, None, 2)), (slice(5, 2),), (Ellipsis,),
                       ([0, 2],), (torch.tensor([1, 0]),)]
            with gdunlock.safe_open(path, "pt") as f:
                s = f.get_slice("w")
                for index in indexes:
                    self.assertTrue(torch.equal(s[index], values["w"][index]), index)
                self.assertTrue(torch.equal(f.get_slice("b")[2:5], values["b"][2:5]))
                self.assertTrue(torch.equal(f.get_slice("s")[...], values["s"]))
                before = f.stats()["bytes_read"]
                f.get_slice("w")[2:3]
                self.assertEqual(f.stats()["bytes_read"] - before, 10 * 4 * 4)

    def test_read_ahead_and_threads(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "many.safetensors")
            tensors = {f"t{i:03d}": ("U8", [1000 + i], bytes([i % 251]) * (1000 + i))
                       for i in range(120)}
            write_safetensors(path, tensors)
            with gdunlock.safe_open(path, "pt", readahead=20000) as f:
                for k in f.keys():
                    self.assertEqual(self.raw(f.get_tensor(k)), tensors[k][2])
                stats = f.stats()
                self.assertEqual(stats["bytes_read"], sum(len(v[2]) for v in tensors.values()))
            # In file order (offset_keys, not sorted order in this file) it
            # follows that order and reads ahead as well.
            ref = file_bytes(SMALL)
            with gdunlock.safe_open(SMALL, "pt") as f:
                self.assertNotEqual(f.offset_keys(), f.keys())
                for k in f.offset_keys():
                    self.assertEqual(self.raw(f.get_tensor(k)), ref[k][2])
                self.assertGreater(f._walk.window, 0)
                self.assertEqual(f.stats()["bytes_read"], sum(len(v[2]) for v in ref.values()))
            # Random order and several threads: every tensor right.
            with gdunlock.safe_open(path, "pt") as f:
                keys = f.keys()
                random.Random(3).shuffle(keys)
                bad = []

                def work(part):
                    for k in part:
                        if self.raw(f.get_tensor(k)) != tensors[k][2]:
                            bad.append(k)
                threads = [threading.Thread(target=work, args=(keys[i::4],)) for i in range(4)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                self.assertEqual(bad, [])

    def test_load_file(self):
        ref = file_bytes(SMALL)
        got = gdunlock.load_file(SMALL)
        self.assertEqual(set(got), set(ref))
        for k, t in got.items():
            self.assertEqual(self.raw(t), ref[k][2])


@unittest.skipIf(torch is None, "torch is not installed")
class WeightsIteratorTest(unittest.TestCase):
    def raw(self, t):
        return t.reshape(-1).view(torch.uint8).numpy().tobytes()

    def test_whole_tensors_once_each(self):
        ref = {}
        for f in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
            ref.update(file_bytes(os.path.join(FIX, "sharded", f)))
        for source in (SHARDED, os.path.join(FIX, "sharded")):
            seen = dict(gdunlock.weights_iterator(source, device="cpu", memory_budget=1))
            self.assertEqual(set(seen), set(ref))
            for k, t in seen.items():
                self.assertEqual(self.raw(t), ref[k][2], k)

    def test_ranks_get_torch_chunk(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "tp.safetensors")
            w = torch.arange(8 * 12, dtype=torch.float32).reshape(8, 12)
            v = torch.arange(10, dtype=torch.int64)
            write_safetensors(path, {"w": ("F32", [8, 12], self.raw(w)),
                                     "v": ("I64", [10], self.raw(v)),
                                     "n": ("F32", [3], self.raw(torch.ones(3)))})
            for world in (2, 4, 8):
                for dim in (0, 1):
                    for rank in range(world):
                        got = dict(gdunlock.weights_iterator(
                            path, device="cpu", rank=rank, world_size=world,
                            shard=lambda name, shape: dim if name == "w" else
                            (0 if name == "v" else None)))
                        want_w = torch.chunk(w, world, dim)
                        want_v = torch.chunk(v, world, 0)
                        if rank < len(want_w):
                            self.assertTrue(torch.equal(got["w"], want_w[rank]))
                        else:
                            self.assertEqual(got["w"].numel(), 0)
                        if rank < len(want_v):
                            self.assertTrue(torch.equal(got["v"], want_v[rank]))
                        self.assertTrue(torch.equal(got["n"], torch.ones(3)))
        with self.assertRaises(ValueError):
            list(gdunlock.weights_iterator(SMALL, device="cpu", rank=2, world_size=2))

    def test_budget_bounds_what_is_read_ahead(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "many.safetensors")
            write_safetensors(path, {f"t{i:02d}": ("U8", [4096], bytes([i]) * 4096)
                                     for i in range(40)})
            it = gdunlock.weights_iterator(path, device="cpu", memory_budget=3 * 4096)
            name, t = next(it)
            self.assertEqual(name, "t00")
            self.assertLessEqual(it._ahead, 3 * 4096)
            self.assertLess(len(it._queue), 6)
            rest = list(it)
            self.assertEqual(len(rest), 39)


if __name__ == "__main__":
    unittest.main()
