"""CPU tests of the Python module (python/gdunlock) over the fixtures:
header table, host loads byte-exact against the file, named errors, device
parsing, strict and lenient opening, FIFOs, releasing the engines under a
running load, and (where torch is installed) torch tensors through DLPack."""
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import FIX, ROOT, SHARDED, SMALL, in_forked_child, reference, torch  # noqa: E402

import gdunlock  # noqa: E402

if torch is not None:
    from gdunlock import torch_bridge


class CheckpointTest(unittest.TestCase):
    def test_table_and_metadata(self):
        with gdunlock.Checkpoint(SMALL) as c:
            self.assertEqual(len(c), 12)
            self.assertEqual(c.files, [SMALL])
            self.assertEqual(c.metadata(), {"format": "pt", "source": "make_fixtures.py"})
            ref = reference(SMALL)
            for t in c.tensors():
                self.assertEqual((t.dtype, t.shape), ref[t.name][:2])
                self.assertEqual(t.address, 0)

    def test_host_load_byte_exact(self):
        for path in (SMALL, SHARDED):
            ref = {}
            with gdunlock.Checkpoint(path) as c:
                for f in c.files:
                    ref.update(reference(f))
                c.load("cpu")
                c.verify()
                stats = c.stats()
                self.assertEqual(stats["tensors"], 12)
                self.assertEqual(stats["backend"], "host")
                for i, t in enumerate(c.tensors()):
                    self.assertEqual(t.device, -1)
                    self.assertEqual(c.host_bytes(i), ref[t.name][2], t.name)

    def test_started_load_has_addresses_before_its_bytes(self):
        ref = reference(SMALL)
        with gdunlock.Checkpoint(SMALL) as c:
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                c.load_finish()
            self.assertEqual(ctx.exception.code, "GDU_ST_ERR_INVALID_ARGUMENT")
            c.load_start("cpu")
            self.assertFalse(c.loaded)
            self.assertTrue(all(t.address != 0 for t in c.tensors()))
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                c.verify()
            self.assertIn("still running", ctx.exception.message)
            c.load_finish()
            self.assertTrue(c.loaded)
            c.verify()
            for i, t in enumerate(c.tensors()):
                self.assertEqual(c.host_bytes(i), ref[t.name][2], t.name)

    def test_named_errors(self):
        cases = {
            "hostile/overlap.safetensors": "GDU_ST_ERR_OVERLAP",
            "hostile/truncated.safetensors": "GDU_ST_ERR_OUT_OF_RANGE",
            "hostile/huge_length.safetensors": "GDU_ST_ERR_HEADER_LENGTH",
            "hostile/tiny.safetensors": "GDU_ST_ERR_TOO_SMALL",
            "bad_index/escape.index.json": "GDU_ST_ERR_PATH_ESCAPE",
            "bad_index/duplicate.index.json": "GDU_ST_ERR_DUPLICATE_TENSOR",
            "missing.safetensors": "GDU_ST_ERR_OPEN",
        }
        for name, code in cases.items():
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                gdunlock.Checkpoint(os.path.join(FIX, name))
            self.assertEqual(ctx.exception.code, code, name)

    def test_missing_gpu_is_named(self):
        with gdunlock.Checkpoint(SMALL) as c:
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                c.load(999)
            self.assertEqual(ctx.exception.code, "GDU_ST_ERR_NO_CUDA")
            with self.assertRaises(gdunlock.GdunlockError):
                c.host_bytes(0)

    def test_parse_device(self):
        self.assertEqual(gdunlock.parse_device(0), (0, [0]))
        self.assertEqual(gdunlock.parse_device("cuda"), (0, [0]))
        self.assertEqual(gdunlock.parse_device("cuda:1"), (0, [1]))
        self.assertEqual(gdunlock.parse_device([0, "cuda:1"]), (0, [0, 1]))
        self.assertEqual(gdunlock.parse_device("cpu"), (1, [0]))
        for bad in ("gpu", -1, True, [], "cuda:x", 1.0):
            with self.assertRaises(ValueError):
                gdunlock.parse_device(bad)
        # "cpu" is no GPU: a list of GPUs cannot hold it (it used to become GPU 0).
        for bad in (["cpu"], [0, "cpu"], ["cpu", 1]):
            with self.assertRaises(ValueError):
                gdunlock.parse_device(bad)

    def test_strict_and_lenient(self):
        for name, code in (("hole", "GDU_ST_ERR_HOLE"), ("late_start", "GDU_ST_ERR_HOLE"),
                           ("trailing", "GDU_ST_ERR_TRAILING")):
            path = os.path.join(FIX, "hostile", name + ".safetensors")
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                gdunlock.Checkpoint(path)
            self.assertEqual(ctx.exception.code, code)
            with gdunlock.Checkpoint(path, lenient=True) as c:
                c.load("cpu")
                c.verify()

    def test_names_keep_nul_and_control_characters(self):
        path = os.path.join(FIX, "control.safetensors")
        ref = reference(path)
        with gdunlock.Checkpoint(path) as c:
            self.assertEqual({t.name for t in c.tensors()}, set(ref))
            self.assertIn("nul\x00byte", ref)
            c.load("cpu")
            for i, t in enumerate(c.tensors()):
                self.assertEqual(c.host_bytes(i), ref[t.name][2])

    def test_metadata_none_when_absent(self):
        with gdunlock.Checkpoint(os.path.join(FIX, "empty.safetensors")) as c:
            self.assertIsNone(c.metadata_or_none())
            self.assertEqual(c.metadata(), {})

    def test_version_matches_the_library_and_cmake(self):
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            cmake = re.search(r"project\(gdunlock VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(gdunlock.__version__, cmake)
        self.assertTrue(os.path.exists(gdunlock.library_path()))


def _python(code, **env):
    """code run by a fresh interpreter that finds the gdunlock package and
    library this process uses (then env over them); its stdout."""
    import subprocess
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gdunlock.__file__)))
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "GDUNLOCK_LOAD_LIB": gdunlock.library_path(), **env}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, timeout=300)
    if p.returncode != 0:
        raise AssertionError(p.stderr[-2000:])
    return p.stdout.strip()


class ImportTest(unittest.TestCase):
    """import gdunlock opens and checks the library, as an extension module
    is loaded at import, so that a process's first load does not pay for it
    inside its clock; a library that cannot be had fails the first call
    that needs it, not the import."""

    def test_the_library_is_open_after_import(self):
        self.assertEqual(_python("import gdunlock; print(gdunlock._lib._lib is not None)"),
                         "True")

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_torch_imported_first_brings_the_bridge(self):
        code = ("import sys, torch, gdunlock; "
                "print('gdunlock.torch_bridge' in sys.modules)")
        self.assertEqual(_python(code), "True")

    def test_a_missing_library_fails_the_first_call_not_the_import(self):
        code = ("import gdunlock\n"
                "try:\n"
                "    gdunlock.library_path()\n"
                "except gdunlock.GdunlockError as e:\n"
                "    print(e.code, '/nonexistent/lib.so' in e.message)\n")
        self.assertEqual(_python(code, GDUNLOCK_LOAD_LIB="/nonexistent/lib.so"),
                         "GDU_ST_ERR_NO_LIBRARY True")


class StartWithCudaTest(unittest.TestCase):
    """With torch imported first, the GPU's engine starts while torch
    initializes CUDA (kept_engines.start_with_cuda, through torch's own queue
    of calls for that moment), where one GPU is visible and unless
    GDUNLOCK_PREPARE=0; whatever the start meets, torch's initialization does
    not fail. A stand-in for torch.cuda records what is queued."""

    def setUp(self):
        from gdunlock import kept_engines
        self.kept = kept_engines
        self.started = []
        self.queued = []
        self.devices = 1
        self.saved = (kept_engines.prepare, os.environ.pop("GDUNLOCK_PREPARE", None),
                      list(kept_engines._start_queued))
        kept_engines.prepare = lambda device=0: self.started.append(device)
        self.torch = self.new_torch()

    def new_torch(self):
        cuda = types.SimpleNamespace(_lazy_call=self.queued.append,
                                     device_count=lambda: self.devices)
        return types.SimpleNamespace(cuda=cuda)

    def tearDown(self):
        self.kept.prepare = self.saved[0]
        self.kept._start_queued[:] = self.saved[2]
        os.environ.pop("GDUNLOCK_PREPARE", None)
        if self.saved[1] is not None:
            os.environ["GDUNLOCK_PREPARE"] = self.saved[1]

    def initialize(self):
        """What torch does once CUDA is up: the queued calls, in order."""
        for call in self.queued:
            call()

    def test_the_engine_starts_when_cuda_does(self):
        self.kept.start_with_cuda(self.torch)
        self.assertEqual(self.started, [], "started before CUDA")
        self.initialize()
        self.assertEqual(self.started, [0])

    def test_nothing_where_the_gpu_is_not_known(self):
        for self.devices in (0, 2):
            self.kept.start_with_cuda(self.new_torch())
            self.initialize()
        self.assertEqual(self.started, [])

    def test_once_per_torch(self):
        self.kept.start_with_cuda(self.torch)
        self.kept.start_with_cuda(self.torch)
        self.assertEqual(len(self.queued), 1)

    def test_nothing_with_gdunlock_prepare_0(self):
        os.environ["GDUNLOCK_PREPARE"] = "0"
        self.kept.start_with_cuda(self.torch)
        self.assertEqual(self.queued, [])

    def test_gdunlock_prepare_takes_every_boolean_word(self):
        """As kvikio's booleans: OFF, FALSE, NO in any case; anything else
        leaves the default (on)."""
        for word in ("OFF", "off", "False", "NO"):
            os.environ["GDUNLOCK_PREPARE"] = word
            self.kept.start_with_cuda(self.new_torch())
        self.assertEqual(self.queued, [])
        os.environ["GDUNLOCK_PREPARE"] = "ON"
        self.kept.start_with_cuda(self.torch)
        self.assertEqual(len(self.queued), 1)

    def test_a_failing_start_does_not_fail_torch(self):
        def refused(device=0):
            raise gdunlock.GdunlockError("GDU_ST_ERR_ENGINE", "test")
        self.kept.prepare = refused
        self.kept.start_with_cuda(self.torch)
        self.initialize()
        broken = self.new_torch()
        broken.cuda.device_count = lambda: 1 / 0
        self.kept.start_with_cuda(broken)
        self.assertEqual(len(self.queued), 2)
        self.initialize()

    def test_a_torch_without_the_hook_starts_nothing(self):
        del self.torch.cuda._lazy_call
        self.kept.start_with_cuda(self.torch)
        self.assertEqual(self.started, [])

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_import_after_torch_queues_the_start_in_torch(self):
        code = ("import torch, gdunlock\n"
                "print([c.__qualname__ for c, _ in torch.cuda._queued_calls])\n")
        self.assertIn("start_with_cuda.<locals>.start", _python(code))
        self.assertNotIn("start_with_cuda", _python(code, GDUNLOCK_PREPARE="0"))

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_patch_queues_it_whatever_was_imported_first(self):
        queued = "print(sum('start_with_cuda' in c.__qualname__ for c, _ in " \
            "torch.cuda._queued_calls))\n"
        self.assertEqual(_python("import gdunlock, torch\n" + queued), "0")
        self.assertEqual(_python("import gdunlock, torch\ngdunlock.patch()\n" + queued), "1")
        self.assertEqual(_python("import torch, gdunlock\ngdunlock.patch()\n" + queued), "1")


class DefaultsTest(unittest.TestCase):
    """gdunlock.defaults, kvikio.defaults' model: get, set as a call and as
    a with block, all or nothing, the loads after it reading with the new
    values. In a fresh interpreter each: the settings are the process's."""

    def test_set_and_get(self):
        code = ("import gdunlock\n"
                "d = gdunlock.defaults\n"
                "print(d.get('workers'), d.get('direct'), d.get('chunk'))\n"
                "d.set('workers', 3)\n"
                "print(d.get('workers'))\n"
                "with d.set({'direct': True, 'staging': 4}):\n"
                "    print(d.get('direct'), d.get('staging'), d.get('chunk'))\n"
                "print(d.get('direct'), d.get('staging'))\n"
                "try:\n"
                "    d.set(workers=5, chunk='1000')\n"
                "except ValueError as e:\n"
                "    print('refused:', e)\n"
                "print(d.get('workers'))\n")
        lines = _python(code, GDUNLOCK_IO_WORKERS="2", GDUNLOCK_IO_DIRECT="OFF").splitlines()
        self.assertEqual(lines[0], "2 off 4194304")
        self.assertEqual(lines[1], "3")
        self.assertEqual(lines[2], "on 4 16777216")  # O_DIRECT's own chunk
        self.assertEqual(lines[3], "off 2")
        self.assertIn("GDUNLOCK_IO_CHUNK=1000 is invalid", lines[4])
        self.assertEqual(lines[5], "3")  # all or nothing: workers=5 undone

    def test_unknown_names(self):
        with self.assertRaisesRegex(KeyError, "threads"):
            gdunlock.defaults.set(threads=4)
        with self.assertRaisesRegex(KeyError, "threads"):
            gdunlock.defaults.get("threads")

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_the_next_load_takes_the_setting(self):
        """The kept engines were made with the old values: set() frees
        them, and the next load's engine has the new ones."""
        code = ("import ctypes, gdunlock\n"
                f"gdunlock.load_safetensors({SMALL!r}, device='cpu')\n"
                "gdunlock.defaults.set('workers', 3)\n"
                f"gdunlock.load_safetensors({SMALL!r}, device='cpu')\n"
                "from gdunlock._lib import lib, StError, check\n"
                "e, err = ctypes.c_void_p(), StError()\n"
                "check(lib().gdu_st_engine_acquire(1, 0, ctypes.byref(e), ctypes.byref(err)), err)\n"
                "f = lib().gdu_io_engine_options\n"
                "f.restype = ctypes.POINTER(ctypes.c_uint * 4)\n"
                "f.argtypes = [ctypes.c_void_p]\n"
                "print(f(e).contents[3])\n"
                "lib().gdu_st_engine_return(e)\n")
        self.assertEqual(_python(code, GDUNLOCK_IO_WORKERS="2"), "3")


class FifoTest(unittest.TestCase):
    """A FIFO as the file, the index or a shard is refused at once (a plain
    open blocks until a writer comes: forever)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        signal.signal(signal.SIGALRM, self._timeout)
        signal.alarm(10)

    def tearDown(self):
        signal.alarm(0)
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)

    @staticmethod
    def _timeout(*_):
        raise TimeoutError("opening a FIFO blocked")

    def test_fifo_refused(self):
        fifo = os.path.join(self.dir, "model.safetensors")
        os.mkfifo(fifo)
        index = os.path.join(self.dir, "model.safetensors.index.json")
        with open(index, "w") as f:
            json.dump({"weight_map": {"t": "model.safetensors"}}, f)
        fifo_index = os.path.join(self.dir, "fifo.index.json")
        os.mkfifo(fifo_index)
        for path in (fifo, index, fifo_index):
            with self.assertRaises(gdunlock.GdunlockError) as ctx:
                gdunlock.Checkpoint(path)
            self.assertEqual(ctx.exception.code, "GDU_ST_ERR_OPEN")
            self.assertIn("not a regular file", ctx.exception.message)
        # The engine's own open (the benchmarks' raw read).
        from gdunlock import engine
        with engine.Engine(host=True) as e:
            with self.assertRaises(gdunlock.GdunlockError):
                e.read(fifo, 0, 8, 1)


class ReleaseTest(unittest.TestCase):
    def test_release_while_another_thread_loads(self):
        """release_engines() while loads run in another thread: refused with
        GDU_ST_ERR_BUSY or done between loads, never a hang (it hung the load
        in gdu_io_wait in 2 of 9 runs when it destroyed the engine under it)."""
        stop, errors, loads = threading.Event(), [], [0]

        def load_loop():
            try:
                while not stop.is_set():
                    with gdunlock.Checkpoint(SHARDED) as c:
                        c.load("cpu")
                    loads[0] += 1
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=load_loop, daemon=True)
        t.start()
        busy = released = 0
        end = time.monotonic() + 2
        while time.monotonic() < end:
            try:
                gdunlock.release_engines()
                released += 1
            except gdunlock.GdunlockError as e:
                self.assertEqual(e.code, "GDU_ST_ERR_BUSY")
                busy += 1
        stop.set()
        t.join(timeout=30)
        self.assertFalse(t.is_alive(), "a load hung after release_engines()")
        self.assertEqual(errors, [])
        self.assertGreater(loads[0], 0)
        self.assertGreater(busy, 0)
        gdunlock.release_engines()


class ForkTest(unittest.TestCase):
    """A child of fork() loads through an engine of its own: the one the
    parent keeps has no worker threads in the child, and a read through it
    waited for ever. The child runs under alarm(): a hang kills it."""

    def test_a_forked_child_loads_after_its_parent(self):
        with gdunlock.Checkpoint(SHARDED) as c:
            c.load("cpu")  # the parent's host engine, kept

        def load():
            with gdunlock.Checkpoint(SHARDED) as c:
                c.load("cpu")
                c.verify()
            return True
        killed, status = in_forked_child(load)
        self.assertEqual(killed, 0, f"the child died of signal {killed} (SIGALRM: it hung)")
        self.assertEqual(status, 0)
        with gdunlock.Checkpoint(SHARDED) as c:  # and the parent's engine goes on
            c.load("cpu")


class DefaultDeviceTest(unittest.TestCase):
    """gdunlock's own loaders say which device they default to (the first
    GPU), and where there is none the error names the argument to pass."""

    def test_the_signature_names_the_device(self):
        import inspect
        for f in (gdunlock.load_safetensors, gdunlock.weights_iterator):
            self.assertEqual(inspect.signature(f).parameters["device"].default, "cuda:0",
                             f.__name__)

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_without_cuda_the_error_names_device_cpu(self):
        if torch.cuda.is_available():
            self.skipTest("a GPU is usable here")
        for load in (lambda: gdunlock.load_safetensors(SMALL),
                     lambda: list(gdunlock.weights_iterator(SMALL))):
            with self.assertRaises(gdunlock.GdunlockError) as caught:
                load()
            self.assertEqual(caught.exception.code, "GDU_ST_ERR_NO_CUDA")
            self.assertIn("device='cpu'", str(caught.exception))


@unittest.skipIf(torch is None, "torch is not installed")
class TorchTest(unittest.TestCase):
    def test_cpu_tensors_match_the_file(self):
        tensors = gdunlock.load_safetensors(SHARDED, device="cpu", verify=True)
        ref = {}
        for f in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
            ref.update(reference(os.path.join(FIX, "sharded", f)))
        self.assertEqual(set(tensors), set(ref))
        for name, t in tensors.items():
            dtype, shape, data = ref[name]
            self.assertEqual(t.device.type, "cpu")
            if dtype == "F4":
                shape = shape[:-1] + (shape[-1] // 2,)
            if torch_bridge.torch_dtype(dtype) is not None:
                self.assertEqual(tuple(t.shape), shape, name)
            raw = t.reshape(-1).view(torch.uint8)
            self.assertEqual(raw.numpy().tobytes(), data, name)

    def test_a_models_folder_loads_as_its_index(self):
        """load_safetensors(DIR), as weights_iterator(DIR) and `gdunlock
        load DIR` read a folder; safe_open(DIR) stays an error."""
        folder = os.path.dirname(SHARDED)
        by_index = gdunlock.load_safetensors(SHARDED, device="cpu")
        by_folder = gdunlock.load_safetensors(folder, device="cpu")
        self.assertEqual(sorted(by_folder), sorted(by_index))
        for name, t in by_index.items():
            self.assertEqual(by_folder[name].reshape(-1).view(torch.uint8).numpy().tobytes(),
                             t.reshape(-1).view(torch.uint8).numpy().tobytes(), name)
        with self.assertRaises(Exception):
            gdunlock.safe_open(folder, framework="pt")

    def test_misaligned_tensor_gets_an_aligned_copy(self):
        t = gdunlock.load_safetensors(os.path.join(FIX, "misaligned.safetensors"), device="cpu")
        self.assertEqual(t["w"].tolist(), [1.5, -2.25])
        self.assertEqual(t["w"].data_ptr() % 4, 0)
        self.assertEqual(t["pad"].tolist(), [7])

    def test_memory_outlives_the_checkpoint(self):
        tensors = gdunlock.load_safetensors(SMALL, device="cpu")
        keep = tensors["model.embed_tokens.weight"]
        before = keep.reshape(-1).view(torch.uint8).numpy().tobytes()
        del tensors
        after = keep.reshape(-1).view(torch.uint8).numpy().tobytes()
        self.assertEqual(after, before)
        self.assertEqual(after, reference(SMALL)["model.embed_tokens.weight"][2])


if __name__ == "__main__":
    unittest.main()
