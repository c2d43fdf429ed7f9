#!/usr/bin/env python3
"""safe_open's get_tensor in key order and in random order, for headers of
many small tensors (issue 22, item 10: random order was quadratic). Host
memory through the engine (backend="pread"), no GPU: the time is the Python
and C bookkeeping per call, not I/O.

    python3 bench/random_order.py [N...]    (default 10000 80000)"""
import json
import os
import random
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gdunlock  # noqa: E402


def write(path, n):
    header = {f"t{i:07d}": {"dtype": "U8", "shape": [8], "data_offsets": [8 * i, 8 * i + 8]}
              for i in range(n)}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(8 * n))


def per_call(path, shuffle):
    with gdunlock.safe_open(path, "pt", backend="pread") as f:
        keys = f.keys()
        if shuffle:
            random.Random(1).shuffle(keys)
        t0 = time.perf_counter()
        for k in keys:
            f.get_tensor(k)
        return (time.perf_counter() - t0) / len(keys) * 1e6


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [10000, 80000]
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            path = os.path.join(d, f"{n}.safetensors")
            write(path, n)
            print(f"{n} tensors: in order {per_call(path, False):.0f} us a call, "
                  f"random order {per_call(path, True):.0f} us a call", flush=True)


if __name__ == "__main__":
    main()
