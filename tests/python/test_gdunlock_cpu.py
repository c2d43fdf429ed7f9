"""CPU tests of the Python module (python/gdunlock) over the fixtures:
header table, host loads byte-exact against the file, named errors, device
parsing, and (where torch is installed) torch tensors through DLPack."""
import json
import os
import struct
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import gdunlock  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "safetensors")
SMALL = os.path.join(FIX, "small.safetensors")
SHARDED = os.path.join(FIX, "sharded", "model.safetensors.index.json")

try:
    import torch
    from gdunlock import torch_bridge
except ImportError:
    torch = None


def reference(path):
    """{name: (dtype, shape, bytes)} read with the stdlib alone."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], tuple(v["shape"]),
                data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


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
