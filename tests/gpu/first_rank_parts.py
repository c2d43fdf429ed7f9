#!/usr/bin/env python3
"""What the first rank of a process pays beyond the next ones (issue 21):
one tensor-parallel split of the checkpoint load_patterns.py makes (every
2-D tensor's slice for rank r of WORLD along DIM, shard by shard, key by key,
as load_patterns.py's rows/cols cases ask), every rank timed in order in one
fresh process, after a preparation that takes one cost out of the first:

  plain   nothing: what the pattern benchmark measures
  engine  gdunlock.prepare(0) waited for before the clocks: the engine made
          and its staging pinned (prepare_s), as a serving engine's loader
          has it once the model is built
  alloc   torch's allocator asked for rank 0's sizes beforehand (alloc0_s,
          then alloc1_s for the same again)
  build   a stand-in for a serving engine building its model: rank 0's
          parameters allocated and kept (build_s) before the clocks
  overlap gdunlock.prepare(0) called first, not waited for, then the same
          build: how much of the engine's start the build hides
  warm    engine and alloc, and one untimed rank (the last) first

Usage: first_rank_parts.py MODEL_DIR DIM WORLD VARIANT; one JSON line
(seconds per rank, bytes per rank, blocks torch's allocator asked the
driver for per rank, the GDUNLOCK_IO_* settings and the
library in use)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load_patterns as lp  # noqa: E402


def rank_sizes(files, dim, world):
    """The element counts of rank 0's part of every 2-D tensor of files."""
    import safetensors
    sizes = []
    for path in files:
        with safetensors.safe_open(path, framework="pt") as f:
            for k in f.keys():
                shape = f.get_slice(k).get_shape()
                if len(shape) == 2:
                    n = 1  # rank_index leaves the dimensions after dim out
                    for d, s in enumerate(lp.rank_index(shape, dim, 0, world)):
                        n *= len(range(*s.indices(shape[d])))
                    sizes.append(n * (shape[1] if dim == 0 else 1))
    return sizes


def main():
    folder, dim, world, variant = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    import torch
    import gdunlock
    files = lp.shards(folder)
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    out = {"variant": variant, "dim": dim, "world": world,
           "lib": os.environ.get("GDUNLOCK_LOAD_LIB", ""),
           "env": {k: v for k, v in os.environ.items() if k.startswith("GDUNLOCK_IO")}}
    if variant in ("engine", "warm"):
        t0 = time.perf_counter()
        gdunlock.prepare(0).wait()
        out["prepare_s"] = time.perf_counter() - t0
    if variant in ("alloc", "warm"):
        sizes = rank_sizes(files, dim, world)
        for rep in range(2):
            t0 = time.perf_counter()
            held = [torch.empty(n, dtype=torch.bfloat16, device="cuda:0") for n in sizes]
            torch.cuda.synchronize()
            out[f"alloc{rep}_s"] = time.perf_counter() - t0
            del held
    if variant in ("build", "overlap"):
        if variant == "overlap":
            gdunlock.prepare(0)
        t0 = time.perf_counter()
        params = [torch.empty(n, dtype=torch.bfloat16, device="cuda:0")
                  for n in rank_sizes(files, dim, world)]  # kept, as a model's are
        torch.cuda.synchronize()
        out["build_s"] = time.perf_counter() - t0
    if variant == "warm":
        lp.sliced(gdunlock.safe_open, files, [(dim, world - 1, world)])
    out["seconds"], out["blocks"] = [], []
    for rank in range(world):
        blocks = torch.cuda.memory_stats()["segment.all.allocated"]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out["bytes"] = lp.sliced(gdunlock.safe_open, files, [(dim, rank, world)])
        torch.cuda.synchronize()
        out["seconds"].append(time.perf_counter() - t0)
        out["blocks"].append(torch.cuda.memory_stats()["segment.all.allocated"] - blocks)
    print(json.dumps(out))
    if variant in ("build", "overlap"):
        del params


if __name__ == "__main__":
    main()
