"""gdunlock.safe_open unpatched against safetensors.safe_open (0.8.0): the
same calls on both, the results and the exception types compared. Each
test is one point of the drop-in promise; skipped where safetensors, torch
or numpy is missing (.ci/run installs them)."""
import errno
import gc
import os
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import SHARDED, SMALL, torch  # noqa: E402
from test_gdunlock_api import write_safetensors  # noqa: E402

import gdunlock  # noqa: E402

try:
    import numpy
    import safetensors
    import safetensors.torch
except ImportError:
    safetensors = None


def outcome(call):
    """call()'s result, or the exception it raised."""
    try:
        return call()
    except Exception as e:  # noqa: BLE001
        return e


@unittest.skipIf(safetensors is None or torch is None, "safetensors, numpy or torch is missing")
class ParityTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="parity with spaces ")
        self.path = self.file("m.safetensors", {
            "b.weight": torch.arange(24, dtype=torch.float32).reshape(4, 6),
            "a.bias": torch.arange(5, dtype=torch.int16),
            "c.half": torch.arange(12, dtype=torch.float16).reshape(3, 2, 2),
            "d.flag": torch.tensor([True, False, True]),
            "e.empty": torch.zeros(0, 3),
            "f.bytes": torch.arange(7, dtype=torch.uint8),
            "g.i64": torch.arange(3, dtype=torch.int64),
            "h.f64": torch.arange(2, dtype=torch.float64),
        }, metadata={"format": "pt"})
        self.bf16 = self.file("bf16.safetensors", {"w": torch.ones(2, 3, dtype=torch.bfloat16)})

    def tearDown(self):
        gc.collect()  # the mappings of tensors still held
        self.dir.cleanup()

    def file(self, name, tensors, metadata=None):
        path = os.path.join(self.dir.name, name)
        safetensors.torch.save_file(tensors, path, metadata=metadata)
        return path

    def both(self, *args, **kwargs):
        """(safetensors' safe_open, gdunlock's) of the same call."""
        return safetensors.safe_open(*args, **kwargs), gdunlock.safe_open(*args, **kwargs)

    def assert_same_failure(self, call, *args, **kwargs):
        """call(safe_open) raises for both modules, gdunlock's exception an
        instance of safetensors' exception's class; returns gdunlock's."""
        theirs = outcome(lambda: call(safetensors.safe_open, *args, **kwargs))
        ours = outcome(lambda: call(gdunlock.safe_open, *args, **kwargs))
        self.assertIsInstance(theirs, Exception, f"safetensors did not raise for {args}")
        self.assertIsInstance(ours, type(theirs), f"{args} {kwargs}: {ours!r} vs {theirs!r}")
        return ours

    def test_a_missing_file_is_a_file_not_found_error(self):
        missing = os.path.join(self.dir.name, "missing.safetensors")
        e = self.assert_same_failure(lambda o: o(missing, "pt"))
        self.assertIsInstance(e, FileNotFoundError)
        self.assertIsInstance(e, gdunlock.GdunlockError)
        self.assertEqual((e.errno, e.filename, e.code), (2, missing, "GDU_ST_ERR_OPEN"))

    def test_a_folder_is_an_os_error_and_says_so(self):
        # safetensors maps it and fails with ENODEV: an OSError; the OS's
        # answer to opening a folder for reading is EISDIR
        e = self.assert_same_failure(lambda o: o(self.dir.name, "pt"))
        self.assertIsInstance(e, IsADirectoryError)

    def test_a_bad_file_is_a_safetensor_error(self):
        bad = {
            "too_small": b"\x01",
            "not_json": b"\x08\x00\x00\x00\x00\x00\x00\x00{bad}   ",
            "header_past_the_end": b"\xff\x00\x00\x00\x00\x00\x00\x00{}",
            "not_an_object": b"\x08\x00\x00\x00\x00\x00\x00\x00[]      ",
        }
        for name, data in bad.items():
            path = os.path.join(self.dir.name, name)
            with open(path, "wb") as f:
                f.write(data)
            e = self.assert_same_failure(lambda o: o(path, "pt"))
            self.assertIsInstance(e, safetensors.SafetensorError, name)
            self.assertIsInstance(e, gdunlock.SafetensorError, name)
            self.assertIsInstance(e, gdunlock.GdunlockError, name)
        # offsets that do not cover the data
        path = os.path.join(self.dir.name, "short_data.safetensors")
        write_safetensors(path, {"x": ("F32", [4], b"\0" * 12)})
        self.assert_same_failure(lambda o: o(path, "pt"))

    def test_a_tensor_the_file_lacks_is_a_safetensor_error(self):
        for f in self.both(self.path, "pt"):
            e = outcome(lambda: f.get_tensor("nope"))
            self.assertIsInstance(e, safetensors.SafetensorError, type(f))
            e = outcome(lambda: f.get_slice("nope"))
            self.assertIsInstance(e, safetensors.SafetensorError, type(f))
        self.assertEqual(e.code, "GDU_ST_ERR_NOT_FOUND")

    def test_a_closed_file_is_a_safetensor_error(self):
        for f in self.both(self.path, "pt"):
            with f:
                pass
            for call in (f.keys, f.offset_keys, f.metadata, f.get_tensors,
                         lambda: f.get_tensor("a.bias"), lambda: f.get_slice("a.bias")):
                self.assertIsInstance(outcome(call), safetensors.SafetensorError, type(f))

    def test_wrong_arguments_are_safetensor_errors(self):
        for framework in ("xx", "PT", ""):
            self.assert_same_failure(lambda o: o(self.path, framework))
        for device in ("foo", -1, "cuda:x", 1.5):
            e = self.assert_same_failure(lambda o: o(self.path, "pt", device=device))
            self.assertIsInstance(e, ValueError)  # as gdunlock's device parsing raised
        self.assert_same_failure(lambda o: o(self.path, "pt", backend="bogus"))
        self.assert_same_failure(lambda o: o(self.path, "np", device="cuda:0"))

    def test_get_tensors_returns_every_tensor_in_file_order(self):
        theirs, ours = (f.get_tensors() for f in self.both(self.path, "pt"))
        self.assertEqual(list(ours), list(theirs))
        for k in theirs:
            self.assertTrue(torch.equal(ours[k], theirs[k]), k)

    def test_numpy_arrays(self):
        for framework in ("np", "numpy"):
            theirs, ours = self.both(self.path, framework)
            self.assertEqual(ours.keys(), theirs.keys())
            for k in theirs.keys():
                a, b = ours.get_tensor(k), theirs.get_tensor(k)
                self.assertIs(type(a), numpy.ndarray, k)
                self.assertEqual((a.dtype, a.shape, a.flags.writeable),
                                 (b.dtype, b.shape, b.flags.writeable), k)
                self.assertTrue(numpy.array_equal(a, b), k)
            got, want = ours.get_tensors(), theirs.get_tensors()
            self.assertEqual(list(got), list(want))
            s, t = ours.get_slice("b.weight"), theirs.get_slice("b.weight")
            for index in (slice(1, 3), (slice(None), slice(2, 4)), 1, -1, (Ellipsis, 2),
                          (slice(0, 4, 2), 3)):
                self.assertTrue(numpy.array_equal(s[index], t[index]), index)
                self.assertEqual(s[index].shape, t[index].shape, index)
            # arrays of their own: writing one changes no other
            a = ours.get_tensor("b.weight")
            a[0, 0] = 99
            self.assertEqual(ours.get_tensor("b.weight")[0, 0], 0)
        # bfloat16: numpy's answer, whatever it is (TypeError without ml_dtypes)
        theirs = outcome(lambda: safetensors.safe_open(self.bf16, "np").get_tensor("w"))
        ours = outcome(lambda: gdunlock.safe_open(self.bf16, "np").get_tensor("w"))
        self.assertIs(type(ours), type(theirs))

    def test_numpy_arrays_need_no_torch(self):
        """safetensors' numpy arrays need no torch; neither do gdunlock's
        (a process where torch cannot be imported). torch tensors still
        need it, and say so."""
        script = (
            "import sys\n"
            "class NoTorch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'torch':\n"
            "            raise ImportError('torch is blocked here')\n"
            "sys.meta_path.insert(0, NoTorch())\n"
            "import gdunlock, safetensors\n"
            "path = sys.argv[1]\n"
            "ours, theirs = gdunlock.safe_open(path, 'np'), safetensors.safe_open(path, 'np')\n"
            "for k in theirs.keys():\n"
            "    assert ours.get_tensor(k).tobytes() == theirs.get_tensor(k).tobytes(), k\n"
            "try:\n"
            "    gdunlock.safe_open(path, 'pt')\n"
            "except gdunlock.GdunlockError as e:\n"
            "    print(e.code)\n")
        python = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "python")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (python, os.environ.get("PYTHONPATH")) if p))
        out = subprocess.run([sys.executable, "-c", script, self.path], env=env,
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "GDU_ST_ERR_NO_TORCH")

    def test_the_defaults(self):
        # device: the CPU when left out or None
        for device in ((), ("cpu",), (None,)):
            theirs, ours = self.both(self.path, "pt", *device)
            self.assertEqual(ours.get_tensor("a.bias").device, theirs.get_tensor("a.bias").device)
        self.assertEqual(ours.keys(), theirs.keys())  # sorted
        self.assertEqual(ours.offset_keys(), theirs.offset_keys())  # by offset
        self.assertEqual(ours.metadata(), theirs.metadata())
        for name, metadata in (("none.safetensors", None), ("empty.safetensors", {})):
            path = self.file(name, {"x": torch.ones(1)}, metadata=metadata)
            theirs, ours = self.both(path, "pt")
            self.assertEqual(ours.metadata(), theirs.metadata(), name)
        s, t = ours.get_slice("x"), theirs.get_slice("x")
        self.assertEqual((s.get_shape(), s.get_dtype()), (t.get_shape(), t.get_dtype()))
        self.assertEqual((type(s.get_shape()), type(s.get_dtype())), (list, str))
        # framework spelled as safetensors spells it
        for framework in ("pt", "torch", "pytorch", "np", "numpy"):
            theirs, ours = self.both(self.path, framework)
            self.assertEqual(type(ours.get_tensor("a.bias")), type(theirs.get_tensor("a.bias")))

    def test_cpu_tensors_are_views_of_the_files_mapping(self):
        """On the CPU a tensor is a view of the file's private mapping, as
        safetensors' is: its storage spans the file, it costs memory only
        where touched, and writing into it never reaches the file."""
        size = os.path.getsize(self.path)
        before = open(self.path, "rb").read()
        theirs, ours = self.both(self.path, "pt")
        for k in theirs.keys():
            a, b = ours.get_tensor(k), theirs.get_tensor(k)
            self.assertTrue(torch.equal(a, b), k)
            self.assertEqual((a.dtype, a.shape), (b.dtype, b.shape), k)
            if a.numel():
                self.assertEqual(a.untyped_storage().nbytes(), size, k)
        for f in (theirs, ours):
            t = f.get_tensor("b.weight")
            t[0, 0] = -1
        self.assertEqual(open(self.path, "rb").read(), before)
        # a slice is a view of it too, with torch's own indexing
        s, t = ours.get_slice("b.weight"), theirs.get_slice("b.weight")
        for index in (slice(1, 3), (slice(None), slice(2, 4)), 2, -1, (Ellipsis, 1), None,
                      (slice(0, 4, 2), slice(1, 6, 3)), slice(2, 100)):
            a, b = s[index], t[index]
            self.assertTrue(torch.equal(a, b), index)
            self.assertEqual(a.untyped_storage().data_ptr(),
                             ours.get_tensor("b.weight").untyped_storage().data_ptr(), index)
        for index in (4, (0, 0, 0)):
            self.assertIsInstance(outcome(lambda: s[index]), IndexError, index)
            self.assertIsInstance(outcome(lambda: t[index]), IndexError, index)
        for index in (slice(None, None, -1), slice(None, None, 0)):
            self.assertIsInstance(outcome(lambda: s[index]), ValueError, index)
            self.assertIsInstance(outcome(lambda: t[index]), ValueError, index)

    def test_pread_gives_each_tensor_memory_of_its_own(self):
        """backend="pread" is how the caller asks for copies: each tensor its
        own memory, as safetensors' pread backend gives it."""
        theirs, ours = self.both(self.path, "pt", backend="pread")
        for k in theirs.keys():
            a, b = ours.get_tensor(k), theirs.get_tensor(k)
            self.assertTrue(torch.equal(a, b), k)
            self.assertEqual(a.untyped_storage().nbytes(), a.numel() * a.element_size(), k)

    def test_load_file(self):
        """gdunlock.load_file as safetensors.torch.load_file: every tensor in
        file order, on the CPU views of the mapping."""
        theirs, ours = safetensors.torch.load_file(self.path), gdunlock.load_file(self.path)
        self.assertEqual(list(ours), list(theirs))
        for k in theirs:
            self.assertTrue(torch.equal(ours[k], theirs[k]), k)
        self.assertEqual(ours["b.weight"].untyped_storage().nbytes(), os.path.getsize(self.path))

    def test_the_mapping_reads_what_the_engine_reads(self):
        """Every dtype of the fixtures (float8, float4, float6 as bytes...),
        and an index's shards, the same through the mapping as through the
        engine."""
        for path in (SMALL, SHARDED):
            with gdunlock.safe_open(path, "pt") as mapped, \
                    gdunlock.safe_open(path, "pt", backend="pread") as read:
                got, want = mapped.get_tensors(), read.get_tensors()
                self.assertEqual(list(got), list(want))
                for k in want:
                    self.assertEqual((got[k].dtype, got[k].shape), (want[k].dtype, want[k].shape))
                    self.assertEqual(got[k].reshape(-1).view(torch.uint8).tolist(),
                                     want[k].reshape(-1).view(torch.uint8).tolist(), k)
                    if not want[k].dim():
                        continue
                    first_row = (slice(0, 1),) + (slice(None),) * (want[k].dim() - 1)
                    want_part = outcome(lambda: read.get_slice(k)[first_row])
                    got_part = outcome(lambda: mapped.get_slice(k)[first_row])
                    if isinstance(want_part, Exception):  # a sub-byte row: refused by both
                        self.assertIs(type(got_part), type(want_part), k)
                        continue
                    self.assertEqual(got_part.reshape(-1).view(torch.uint8).tolist(),
                                     want_part.reshape(-1).view(torch.uint8).tolist(), k)

    def test_a_file_replaced_or_removed_after_the_open_reads_as_it_was(self):
        """safetensors maps the file at the open, and keeps giving that
        file; gdunlock maps it at the first tensor, only while the path
        still names the file opened, and reads it through the engine (the
        library's validated descriptor) otherwise: the same answers."""
        want = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        for how in ("replaced", "removed"):
            path = self.file(f"{how}.safetensors", {"b.weight": want, "a": torch.ones(2)})
            opened = [(kind, framework, kind(path, framework))
                      for kind in (safetensors.safe_open, gdunlock.safe_open)
                      for framework in ("pt", "np")]
            other = self.file("other.safetensors", {"b.weight": -want, "a": torch.ones(2)})
            if how == "replaced":  # the same size and header: only the bytes differ
                os.replace(other, path)
            else:
                os.unlink(path)
            for kind, framework, f in opened:
                got = f.get_tensor("b.weight")
                self.assertEqual(got.tolist(), want.tolist(), (how, kind, framework))
                self.assertEqual(f.get_slice("b.weight")[1:3].tolist(), want[1:3].tolist(),
                                 (how, kind, framework))

    def test_a_file_rewritten_in_place_with_its_time_put_back_is_not_mapped(self):
        """cp -p and rsync --inplace -t rewrite a file and put its
        modification time back: only the change time tells, and such a
        file is read through the engine, as a shard opened ahead is."""
        path = self.file("inplace.safetensors", {"b.weight": torch.ones(4, 6)})
        with gdunlock.safe_open(path, "pt") as f:
            st = os.stat(path)
            time.sleep(0.01)  # a change time the rewrite cannot share
            with open(path, "r+b") as w:
                w.write(open(path, "rb").read())
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            got = f.get_tensor("b.weight")
            self.assertEqual(got.untyped_storage().nbytes(), got.numel() * got.element_size())
            self.assertGreater(f.stats()["bytes_read"], 0)

    def test_a_file_that_cannot_be_mapped_is_read_through_the_engine(self):
        """A file system that cannot map the file (ENODEV): the engine's
        reads, as on a GPU, not an error."""
        want = safetensors.torch.load_file(self.path)
        cannot = OSError(errno.ENODEV, os.strerror(errno.ENODEV))
        with mock.patch("gdunlock.host_map.mmap.mmap", side_effect=cannot):
            for framework in ("pt", "np"):
                with gdunlock.safe_open(self.path, framework) as f:
                    for k in want:
                        got = torch.as_tensor(f.get_tensor(k))
                        self.assertTrue(torch.equal(got, want[k]), (framework, k))
                    self.assertEqual(f.get_slice("b.weight")[1].tolist(),
                                     want["b.weight"][1].tolist())
                    self.assertGreater(f.stats()["bytes_read"], 0)

    def test_a_tensor_off_its_element_size_is_copied_aligned(self):
        """A file may place a tensor at any byte; torch has no view of a
        4-byte element at an odd address, so that tensor is copied."""
        path = os.path.join(self.dir.name, "odd.safetensors")
        data = torch.arange(3, dtype=torch.float32).numpy().tobytes()
        write_safetensors(path, {"a": ("U8", [1], b"\7"), "b": ("F32", [3], data)})
        with gdunlock.safe_open(path, "pt") as f:
            self.assertEqual(f.get_tensor("b").tolist(), [0.0, 1.0, 2.0])
            self.assertEqual(f.get_slice("b")[1:].tolist(), [1.0, 2.0])
            self.assertEqual(f.get_tensor("a").tolist(), [7])


if __name__ == "__main__":
    unittest.main()
