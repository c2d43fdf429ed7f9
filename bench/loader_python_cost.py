#!/usr/bin/env python3
"""The Python cost of a rank's slice requests through gdunlock.safe_open,
with the engine left out (its submits return at once and read nothing): the
part of a tensor-parallel load that the caller's thread spends in gdunlock's
bookkeeping, which bounds the 4- and 8-way splits on the H200
(bench/results/2026-12-02-h200-slice-ranks-python-thread.md). Needs no GPU:
tensors go to host memory through the engine (backend="pread": the CPU's
default maps the file instead).

Every rank of one split (rows: dim 0, columns: dim 1) is asked for as
bench/gpu/load_patterns.py asks it: each shard opened in turn, every 2-D
tensor's part for the rank, key by key. Prints the best pass's microseconds
per request, opens included (one line, or JSON with --json).

    PYTHONPATH=python python3 bench/loader_python_cost.py MODEL_DIR [--dim 0] [--world 8]

Compare two trees by running it with each tree's python/ on PYTHONPATH, in
turns, on an otherwise idle machine."""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
import load_patterns as lp  # noqa: E402


class _Done:
    """A submitted read that has nothing to wait for."""

    def __init__(self, nbytes):
        self.nbytes = nbytes

    def wait(self):
        return self.nbytes

    def place(self, address, keep):
        pass

    def fill(self, allocate):
        return allocate()[1]

    def cancel(self):
        pass


def _queue_nothing(self, source, n, total, keep, submit, extents=None, deferred=False):
    self.bytes_read += total
    self.requests += 1
    return _Done(total)


def leave_the_engine_out():
    """Every read the loader submits goes through RangeReader._queue (whole
    tensors, slices as boxes, batches read ahead): replaced, they return at
    once. Refuses to measure when that funnel is gone: from 0323bc7 until
    this check the script stubbed a method nothing called any more and
    timed the reads themselves."""
    from gdunlock import reader
    if not callable(getattr(reader.RangeReader, "_queue", None)):
        raise SystemExit("loader_python_cost: gdunlock.reader.RangeReader._queue is gone; "
                         "stub what the loader's reads go through now")
    reader.RangeReader._queue = _queue_nothing


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a folder of numbered .safetensors shards")
    ap.add_argument("--dim", type=int, default=0, choices=(0, 1))
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--passes", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import gdunlock
    leave_the_engine_out()
    files = lp.shards(a.model)

    def rank(r):
        requests = 0
        for path in files:
            with gdunlock.safe_open(path, framework="pt", device="cpu", backend="pread") as f:
                for k in f.keys():
                    s = f.get_slice(k)
                    shape = s.get_shape()
                    if len(shape) == 2:
                        s[lp.rank_index(shape, a.dim, r, a.world)]
                        requests += 1
        return requests

    best = requests = None
    for _ in range(a.passes):
        t = time.perf_counter()
        requests = sum(rank(r) for r in range(a.world))
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    out = {"dim": a.dim, "world": a.world, "requests_per_pass": requests, "passes": a.passes,
           "us_per_request": best / requests * 1e6, "gdunlock": os.path.dirname(gdunlock.__file__)}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{'rows' if a.dim == 0 else 'columns'}, {a.world} ways: "
              f"{out['us_per_request']:.1f} us per request (best of {a.passes} passes of "
              f"{requests} requests, opens included; {out['gdunlock']})")


if __name__ == "__main__":
    main()
