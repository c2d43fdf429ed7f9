"""What the Python tests share: the module on the path, the fixtures, torch
when installed, and a standard-library reader of safetensors files."""
import json
import os
import signal
import struct
import sys
import warnings

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


def in_forked_child(check, seconds=30):
    """Runs check() in a child of fork() under alarm(seconds), a hang
    killing it; returns (the signal that killed it or 0, its exit status:
    0 when check returned True)."""
    with warnings.catch_warnings():  # fork() of a process with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        signal.alarm(seconds)
        code = 1
        try:
            code = 0 if check() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status), 0
    return 0, os.WEXITSTATUS(status)
