#!/usr/bin/env python3
"""Requests that wait alone on the engine (issue 21): safe_open of every
shard of a checkpoint with readahead=0 and get_tensor of every key, so that
each tensor's read is the only one queued and its time is what the engine's
dispatch gives a caller waiting for one request. One fresh process per
(round, variant), the variants in turn and their order reversed every other
round. A variant is NAME=LIB, a build of libgdunlock-load.so
(GDUNLOCK_LOAD_LIB).

    python3 requests_alone.py MODEL_DIR OUT.jsonl head=OLD/libgdunlock-load.so \\
        new=build/lib/libgdunlock-load.so

Prints, per process, the walk's milliseconds and GB/s and the median time of
tensors of 8-32 MiB and of 32 MiB and more; writes one JSON line per
process (variant, round, seconds, bytes, and every tensor's bytes and
seconds)."""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from load_patterns import shards  # noqa: E402
from patterns_ab import order  # noqa: E402

ROUNDS = 3


def walk(model):
    """Every key of every shard, each read alone: (seconds, bytes, [(bytes,
    seconds) per tensor])."""
    import torch
    import gdunlock
    files = shards(model)
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    each, total, t0 = [], 0, time.perf_counter()
    for path in files:
        with gdunlock.safe_open(path, framework="pt", device="cuda:0", readahead=0) as f:
            for k in f.keys():
                a = time.perf_counter()
                t = f.get_tensor(k)
                n = t.numel() * t.element_size()
                each.append((n, time.perf_counter() - a))
                total += n
    torch.cuda.synchronize()
    return time.perf_counter() - t0, total, each


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        seconds, total, each = walk(sys.argv[2])
        print(json.dumps({"seconds": seconds, "bytes": total, "lat": each}))
        return 0
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    model, out, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
    results = []
    for rnd in range(ROUNDS):
        for v in order(variants, rnd):
            name, _, lib = v.partition("=")
            env = dict(os.environ, GDUNLOCK_LOAD_LIB=lib)
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", model],
                               env=env, capture_output=True, text=True)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            if not lines:
                print(f"{name} round {rnd}: failed: {p.stderr.strip()[-400:]}", flush=True)
                continue
            r = json.loads(lines[-1])
            r.update(variant=name, round=rnd)
            results.append(r)
            big = [t * 1e3 for b, t in r["lat"] if b >= 32 << 20]
            mid = [t * 1e3 for b, t in r["lat"] if 8 << 20 <= b < 32 << 20]
            print(f"{name:6s} round {rnd}: {r['seconds'] * 1e3:.1f} ms "
                  f"{r['bytes'] / r['seconds'] / 1e9:.2f} GB/s; >=32 MiB median "
                  f"{statistics.median(big):.2f} ms ({len(big)}); 8-32 MiB median "
                  f"{statistics.median(mid):.2f} ms ({len(mid)})", flush=True)
    with open(out, "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
