#!/usr/bin/env python3
"""gdunlock's Python loader against safetensors 0.8 at scale, to host
memory on the CPU (issue 54, items 7 and 10): time and peak memory

  shards:  a checkpoint of N numbered shards behind an index JSON (10,000
           by default), every tensor through weights_iterator(index), against
           safetensors' safe_open of each shard and get_tensor of each key;
  tensors: one file of N tensors (1,000,000 by default), get_tensor of every
           key through gdunlock.safe_open (the CPU's default, views of the
           file's mapping, and backend="pread", through the engine) and
           through weights_iterator, against safetensors' safe_open and
           get_tensor of every key.

The data is made in a temporary folder. Each run is a process of its own,
so that its peak resident memory (VmHWM) is its own; the table shows it
and its growth over the process before the run (torch imported, the
module loaded). Tensors are dropped as they come, as a loader copying them
into its parameters does. Prints one JSON line, then a table.

    PYTHONPATH=python python3 bench/scale_vs_safetensors.py [--shards N] [--tensors N]
        [--only shards|tensors] [--json]"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def write_file(path, names, nbytes):
    """A safetensors file of names, each a 1-D U8 tensor of nbytes, written
    as the reference writes one (sorted names, offsets in that order)."""
    header, offset = {}, 0
    for name in sorted(names):
        header[name] = {"dtype": "U8", "shape": [nbytes], "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.write(bytes(range(256)) * (offset // 256) + bytes(offset % 256))


def make_shards(folder, count, per_shard=2, nbytes=1024):
    """count numbered shards of per_shard tensors each and their index
    JSON; returns the index's path."""
    weight_map = {}
    for s in range(count):
        name = f"model-{s + 1:05d}-of-{count:05d}.safetensors"
        names = [f"model.layers.{s}.w{t}" for t in range(per_shard)]
        write_file(os.path.join(folder, name), names, nbytes)
        weight_map.update({n: name for n in names})
    index = os.path.join(folder, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return index


def make_tensors(folder, count, nbytes=4):
    path = os.path.join(folder, "many.safetensors")
    write_file(path, [f"t.{i}" for i in range(count)], nbytes)
    return path


def memory_kib():
    """(resident now, peak resident) of this process, KiB."""
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return values["VmRSS"], values["VmHWM"]


def child(case, path):
    """One run in this process: prints {"seconds", "tensors", "rss_before_kib",
    "peak_kib"}."""
    import torch  # noqa: F401  (imported before the baseline, by both sides)
    if case.startswith("gdunlock"):
        import gdunlock
        gdunlock.Checkpoint  # the library loaded before the baseline
        from gdunlock._lib import lib
        lib()
    else:
        from safetensors import safe_open
    before, _ = memory_kib()
    start, count = time.perf_counter(), 0
    if case == "gdunlock-iterator":
        for _, tensor in gdunlock.weights_iterator(path, device="cpu"):
            count += 1
            del tensor
    elif case.startswith("gdunlock-get_tensor"):  # -pread: through the engine
        backend = "pread" if case.endswith("-pread") else None
        with gdunlock.safe_open(path, "pt", device="cpu", backend=backend) as f:
            for name in f.keys():
                f.get_tensor(name)
                count += 1
    elif case == "safetensors-get_tensor":
        if path.endswith(".json"):
            with open(path) as f:
                weight_map = json.load(f)["weight_map"]
            folder = os.path.dirname(path)
            files = sorted(set(weight_map.values()))
        else:
            folder, files = "", [path]
        for name in files:
            with safe_open(os.path.join(folder, name), framework="pt", device="cpu") as f:
                for key in f.keys():
                    f.get_tensor(key)
                    count += 1
    else:
        raise SystemExit(f"unknown case {case}")
    seconds = time.perf_counter() - start
    _, peak = memory_kib()
    print(json.dumps({"seconds": seconds, "tensors": count, "rss_before_kib": before,
                      "peak_kib": peak}))


def run(case, path):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", case, path],
                         capture_output=True, text=True)
    if out.returncode != 0:  # what failed, in the result
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=10_000)
    ap.add_argument("--tensors", type=int, default=1_000_000)
    ap.add_argument("--only", choices=("shards", "tensors"))
    ap.add_argument("--json", action="store_true", help="the JSON line alone")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    results = []
    with tempfile.TemporaryDirectory() as d:
        if a.only in (None, "shards"):
            os.mkdir(os.path.join(d, "shards"))
            index = make_shards(os.path.join(d, "shards"), a.shards)
            for case in ("gdunlock-iterator", "safetensors-get_tensor"):
                results.append({"data": f"{a.shards} shards", "case": case, **run(case, index)})
        if a.only in (None, "tensors"):
            path = make_tensors(d, a.tensors)
            for case in ("gdunlock-get_tensor", "gdunlock-get_tensor-pread", "gdunlock-iterator",
                         "safetensors-get_tensor"):
                results.append({"data": f"{a.tensors} tensors", "case": case, **run(case, path)})
    print(json.dumps({"benchmark": "scale_vs_safetensors", "results": results}))
    if a.json:
        return
    print(f"{'data':<18} {'case':<24} {'tensors':>9} {'seconds':>8} {'peak MiB':>9} "
          f"{'growth MiB':>10}")
    for r in results:
        if "error" in r:
            print(f"{r['data']:<18} {r['case']:<24} failed: {r['error']}")
            continue
        print(f"{r['data']:<18} {r['case']:<24} {r['tensors']:>9} {r['seconds']:>8.2f} "
              f"{r['peak_kib'] / 1024:>9.0f} {(r['peak_kib'] - r['rss_before_kib']) / 1024:>10.0f}")


if __name__ == "__main__":
    main()
