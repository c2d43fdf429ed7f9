#!/usr/bin/env python3
"""Memory of a CPU load: every key of a safetensors file read with
get_tensor() and held, in a fresh process per loader, against
safetensors.safe_open. Prints each process's peak resident memory
(getrusage's ru_maxrss) and, at the end, its anonymous and file-backed
resident memory (/proc/self/status RssAnon, RssFile), before and after
every tensor's bytes are touched (summed). Not a timed test: a benchmark,
needing no GPU.

    PYTHONPATH=python python3 bench/cpu_load_memory.py [FILE] [--gb 3] [--json]

Without FILE a file of --gb gigabytes (4096 x 4096 bf16 tensors and their
norms) is written to a temporary folder and removed after. Loaders:
  safetensors        safetensors.safe_open(path, "pt")  (a private mapping)
  gdunlock           gdunlock.safe_open(path, "pt")     (the CPU's default: a mapping)
  gdunlock-pread     gdunlock.safe_open(path, "pt", backend="pread")
                     (the engine's reads into memory of each tensor's own,
                     as every CPU load was before the mapping)
The bytes counted as file-backed are page cache the kernel can drop; the
anonymous ones are the process's own."""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

LOADERS = ("safetensors", "gdunlock", "gdunlock-pread")

_CHILD = r"""
import json, resource, sys
loader, path = sys.argv[1], sys.argv[2]
import torch

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024
    return out

if loader == "safetensors":
    import safetensors
    f = safetensors.safe_open(path, "pt")
else:
    import gdunlock
    f = gdunlock.safe_open(path, "pt", **({"backend": "pread"} if loader.endswith("pread") else {}))
before = status()
held = {k: f.get_tensor(k) for k in f.keys()}
loaded = status()
peak_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
total = sum(float(t.sum()) for t in held.values())  # every page read
touched = status()
print(json.dumps({"loader": loader, "tensors": len(held),
                  "tensor_bytes": sum(t.numel() * t.element_size() for t in held.values()),
                  "before": before, "loaded": loaded, "peak_loaded": peak_loaded,
                  "touched": touched,
                  "peak_touched": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def write_file(path, gb):
    """A Llama-like file of about gb gigabytes: 4096 x 4096 bf16 weights,
    each with a 4096-element norm, written in 64 MiB pieces."""
    side = 4096
    weight, norm = side * side * 2, side * 2
    n = max(1, int(gb * 1e9) // (weight + norm))
    header, offset = {}, 0
    for i in range(n):
        for name, shape, size in ((f"model.layers.{i}.mlp.weight", [side, side], weight),
                                  (f"model.layers.{i}.norm.weight", [side], norm)):
            header[name] = {"dtype": "BF16", "shape": shape,
                            "data_offsets": [offset, offset + size]}
            offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    piece = bytes(range(256)) * (64 << 12)  # 64 MiB, not zeros: real pages
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        left = offset
        while left:
            f.write(piece[:min(left, len(piece))])
            left -= min(left, len(piece))


def run(loader, path):
    env = dict(os.environ)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", _CHILD, loader, path], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?")
    ap.add_argument("--gb", type=float, default=3.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = a.file
        if path is None:
            path = os.path.join(tmp, "model.safetensors")
            write_file(path, a.gb)
        size = os.path.getsize(path)
        rows = [run(loader, path) for loader in LOADERS]
    if a.json:
        print(json.dumps({"file_bytes": size, "rows": rows}))
        return
    gib = 1 << 30
    print(f"a file of {size / 1e9:.2f} GB, {rows[0]['tensors']} tensors, "
          f"{rows[0]['tensor_bytes'] / 1e9:.2f} GB of them held")
    print(f"{'loader':16} {'peak RSS':>9} {'anon':>7} {'file':>7}  "
          f"{'touched: peak':>13} {'anon':>7} {'file':>7}  (GiB)")
    for r in rows:
        print(f"{r['loader']:16} {r['peak_loaded'] / gib:9.2f} "
              f"{r['loaded']['RssAnon'] / gib:7.2f} {r['loaded']['RssFile'] / gib:7.2f}  "
              f"{r['peak_touched'] / gib:13.2f} {r['touched']['RssAnon'] / gib:7.2f} "
              f"{r['touched']['RssFile'] / gib:7.2f}")


if __name__ == "__main__":
    main()
