"""What the Python tests share: the module on the path, the fixtures, torch
when installed, and a standard-library reader of safetensors files."""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

FIX = os.path.join(ROOT, "tests", "fixtures", "safetensors")
SMALL = os.path.join(FIX, "small.safetensors")
SHARDED = os.path.join(FIX, "sharded", "model.safetensors.index.json")

try:
    import torch
except ImportError:
    torch = None


def reference(path):
    """{name: (dtype, shape, bytes)} read with the standard library alone."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], tuple(v["shape"]),
                data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}
