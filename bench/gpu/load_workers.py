#!/usr/bin/env python3
"""The first load of a fresh process at several engine shapes (workers x
staging slots per worker, GDUNLOCK_IO_WORKERS / GDUNLOCK_IO_STAGING), rounds
alternating, page cache warm, and the ceiling (`gdunlock bench` host and h2d
rows) at each worker count, all in one run: the evidence for the engine's
default shape on this machine (issue 12, item 4). INFO lines only.

    python3 load_workers.py --path CKPT --gdunlock BUILD/bin/gdunlock --out OUT \\
        [--shapes 8x3,12x3,16x3,16x2] [--rounds 5]

Writes load_workers.json to --out.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

# load.sh's loader runs and ceiling, shared with the check that gates on them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gpu"))
from load_compare import bench_ceiling, run_one  # noqa: E402


def shape_env(base, workers, staging=None):
    """base with the engine's shape set (staging left to the default: None)."""
    env = dict(base, GDUNLOCK_IO_WORKERS=workers)
    if staging is not None:
        env["GDUNLOCK_IO_STAGING"] = staging
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", required=True)
    ap.add_argument("--gdunlock", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--shapes", default="8x3,12x3,16x3,16x2")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    a.fastsafetensors = None  # what run_one and bench_ceiling read besides the above
    shapes = a.shapes.split(",")
    base = {k: v for k, v in os.environ.items() if not k.startswith("GDUNLOCK_IO_")}
    with open(a.path, "rb", buffering=0) as f:  # page cache warm for every shape alike
        while f.read(64 << 20):
            pass
    runs = []
    for r in range(a.rounds):
        order = shapes if r % 2 == 0 else shapes[::-1]
        for shape in order:
            for loader in ("gdunlock-load", "gdunlock-cli"):
                res = run_one(loader, a, shape_env(base, *shape.split("x")))
                res.update(shape=shape, round=r)
                runs.append(res)
    ceilings = {}
    for workers in sorted({s.split("x")[0] for s in shapes}, key=int):
        rows, doc = bench_ceiling(a, shape_env(base, workers))  # host, h2d: no staging
        ceilings[workers] = rows or {"error": doc.get("error", "")}
        print(f"INFO load-workers-ceiling {workers} threads: {ceilings[workers]}", flush=True)
    summary = {}
    for shape in shapes:
        for loader in ("gdunlock-load", "gdunlock-cli"):
            done = [x for x in runs if x["shape"] == shape and x["loader"] == loader
                    and "seconds" in x]
            if not done:
                print(f"INFO load-workers {shape} {loader}: every run failed: "
                      f"{[x.get('error') for x in runs if x['shape'] == shape][:1]}")
                continue
            gbps = done[0]["bytes"] / statistics.median(x["seconds"] for x in done) / 1e9
            summary[f"{shape} {loader}"] = gbps
            print(f"INFO load-workers {shape} {loader}: median {gbps:.2f} GB/s, rounds "
                  + ", ".join(f"{x['seconds']:.3f}" for x in done) + " s", flush=True)
    result = {"runs": runs, "ceilings": ceilings, "median_gbps": summary,
              "machine": {"host": platform.node(), "python": platform.python_version(),
                          "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())},
              "command": f"bench/gpu/load_workers.py --shapes {a.shapes} --rounds {a.rounds}"}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "load_workers.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
