"""patch() against the real safetensors (and a stand-in of transformers 5's
loading step): every call gdunlock does not serve reaches safetensors
unchanged, errors keep safetensors' types, isinstance holds, and while
patched, transformers' parameters bound for a GPU are read straight to that
GPU. Skipped where safetensors or torch is missing (.ci/run installs both
where a CPU build of torch is at hand)."""
import os
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import torch  # noqa: E402

import gdunlock  # noqa: E402
from gdunlock import patching  # noqa: E402

try:
    import safetensors
    import safetensors.numpy
    import safetensors.torch
except ImportError:
    safetensors = None


@unittest.skipIf(safetensors is None or torch is None, "safetensors or torch is not installed")
class RealSafetensorsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "m.safetensors")
        self.tensors = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                        "b": torch.ones(4, dtype=torch.bfloat16)}
        safetensors.torch.save_file(self.tensors, self.path, metadata={"k": "v"})
        self.original_open = safetensors.safe_open
        self.original_np_load = safetensors.numpy.load_file
        gdunlock.patch()

    def tearDown(self):
        gdunlock.unpatch()
        self.dir.cleanup()

    def test_what_gdunlock_does_not_serve_goes_to_safetensors(self):
        # numpy (and any other framework) through safetensors' own code
        plain = os.path.join(self.dir.name, "f32.safetensors")  # numpy has no bfloat16
        safetensors.torch.save_file({"a": self.tensors["a"]}, plain)
        got = safetensors.numpy.load_file(plain)
        self.assertEqual(got["a"].tolist(), self.tensors["a"].tolist())
        with safetensors.safe_open(plain, framework="np") as f:
            self.assertEqual(f.get_tensor("a").tolist(), self.tensors["a"].tolist())
        self.assertIn("framework 'np'", str(patching.fallbacks[-1]))
        # a device gdunlock does not handle: safetensors' answer, whatever it is
        for device in ("mps", "xpu:0", "npu", "hpu"):
            try:
                want = type(self.original_open(self.path, "pt", device=device))
            except Exception as e:  # noqa: BLE001
                want = type(e)
            try:
                got = type(safetensors.safe_open(self.path, "pt", device=device))
            except Exception as e:  # noqa: BLE001
                got = type(e)
            self.assertIs(got, want, device)
        # an unknown option, and a backend safetensors refuses
        with self.assertRaises(TypeError):
            safetensors.safe_open(self.path, "pt", mystery=1)
        with self.assertRaises(safetensors.SafetensorError):
            safetensors.safe_open(self.path, "pt", backend="bogus")

    def test_served_calls_behave_as_safetensors(self):
        with safetensors.safe_open(self.path, framework="pt", device=None) as f:
            self.assertIsInstance(f, safetensors.safe_open)
            self.assertEqual(f.get_tensor("a").device.type, "cpu")
            self.assertEqual(f.metadata(), {"k": "v"})
            self.assertEqual(set(f.get_tensors()), {"a", "b"})
            self.assertTrue(torch.equal(f.get_tensors()["b"], self.tensors["b"]))
            self.assertEqual(tuple(f.get_slice("a")[None].shape), (1, 2, 3))
            self.assertEqual(tuple(f.get_slice("a")[True].shape), (1, 2, 3))
            with self.assertRaises(ValueError):
                f.get_slice("a")[::-1]
            with self.assertRaises(safetensors.SafetensorError) as ctx:
                f.get_tensor("missing")
            self.assertIsInstance(ctx.exception, gdunlock.GdunlockError)
        with self.original_open(self.path, framework="pt") as g:
            self.assertIsInstance(g, safetensors.safe_open)
        with self.assertRaises(FileNotFoundError) as ctx:
            safetensors.safe_open(self.path + ".missing", framework="pt")
        self.assertIsInstance(ctx.exception, gdunlock.GdunlockError)
        bad = os.path.join(self.dir.name, "bad.safetensors")
        with open(bad, "wb") as out:
            out.write(b"garbage")
        with self.assertRaises(safetensors.SafetensorError):
            safetensors.safe_open(bad, framework="pt")
        got = safetensors.torch.load_file(self.path)
        self.assertTrue(torch.equal(got["a"], self.tensors["a"]))

    def test_unpatch_restores_every_module(self):
        late = types.ModuleType("imported_while_patched")
        late.safe_open = safetensors.safe_open  # `from safetensors import safe_open`
        sys.modules[late.__name__] = late
        try:
            with patching.patched():  # inside patch(): leaves it in place
                pass
            self.assertIsNot(safetensors.safe_open, self.original_open)
            gdunlock.unpatch()
            self.assertIs(safetensors.safe_open, self.original_open)
            self.assertIs(late.safe_open, self.original_open)
        finally:
            del sys.modules[late.__name__]


@unittest.skipIf(safetensors is None or torch is None, "safetensors or torch is not installed")
class TransformersRouteTest(unittest.TestCase):
    """transformers 5 materializes each parameter with
    core_model_loading._materialize_copy(slice, device, dtype): slice[...],
    then .to(device, dtype). Under patch() a parameter bound for a GPU must be
    read straight into that GPU, never into host memory first."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "m.safetensors")
        safetensors.torch.save_file({"w": torch.arange(8, dtype=torch.float32)}, self.path)
        self.calls = []
        module = types.ModuleType("transformers.core_model_loading")

        def _materialize_copy(tensor, device=None, dtype=None):
            tensor = tensor[...]
            if dtype is not None or device is not None:
                tensor = tensor.to(device=device, dtype=dtype)
            return tensor
        module._materialize_copy = _materialize_copy
        self.saved = sys.modules.get(module.__name__)
        sys.modules[module.__name__] = module
        self.module = module
        self.real_read_to = gdunlock.safe_open.read_to
        calls = self.calls

        def read_to(owner, name, index, device):
            calls.append((name, index, device))
            return owner.get_tensor(name)  # stands in for the GPU's copy on this CPU machine
        gdunlock.safe_open.read_to = read_to

    def tearDown(self):
        gdunlock.unpatch()
        gdunlock.safe_open.read_to = self.real_read_to
        if self.saved is None:
            del sys.modules[self.module.__name__]
        else:
            sys.modules[self.module.__name__] = self.saved
        self.dir.cleanup()

    def test_parameters_for_a_gpu_go_straight_there(self):
        original = self.module._materialize_copy
        gdunlock.patch()
        with safetensors.safe_open(self.path, framework="pt", device="cpu",
                                   backend="mmap") as f:
            s = f.get_slice("w")
            before = patching.stats()["tensors"]
            out = self.module._materialize_copy(s, "cuda:0", torch.float16)
            self.assertEqual(self.calls, [("w", None, "cuda:0")])
            self.assertEqual(out.dtype, torch.float16)
            self.assertTrue(torch.equal(out, torch.arange(8, dtype=torch.float16)))
            self.assertEqual(patching.stats()["tensors"], before + 1)
            # cpu-bound parameters take transformers' own way
            self.module._materialize_copy(f.get_slice("w"), "cpu", None)
            self.assertEqual(len(self.calls), 1)
        gdunlock.unpatch()
        self.assertIs(self.module._materialize_copy, original)


if __name__ == "__main__":
    unittest.main()
