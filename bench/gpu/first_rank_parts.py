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
  idle    warm, then one second asleep: what idleness alone gives back
          (a file's mapping is kept 2 s, so the columns' stay made)
  gpu     three 256 MiB copies from pinned host memory to the GPU, their
          buffers kept: copy engines, PCIe and clocks busy, torch's cache
          not warmed
  block   one 256 MiB tensor allocated and freed: torch's cache holds it
  python  rank 0 walked first over a copy of the checkpoint with every
          dimension cut to 64 (the same names), then the loader's caches
          and hints cleared: its Python warm, nothing else
VARIANT may join several with commas (gpu,block,python). With
GDU_FIRST_RANK_PROFILE=1 rank 0 runs under cProfile and the JSON carries
its 40 functions of most own time.

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


def tiny_copy(folder, out):
    """folder's shards again in out (made once), every tensor with its name
    and dtype and each dimension cut to 64 (zeros): a walk over them runs
    the loader's Python, and little else."""
    import safetensors
    import torch
    from safetensors.torch import save_file
    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    os.makedirs(out, exist_ok=True)
    for path in lp.shards(folder):
        if os.path.exists(os.path.join(out, os.path.basename(path))):
            continue  # made by an earlier process
        tensors = {}
        with safetensors.safe_open(path, framework="pt") as f:
            for k in f.keys():
                s = f.get_slice(k)
                tensors[k] = torch.zeros([min(n, 64) for n in s.get_shape()],
                                         dtype=dtypes[s.get_dtype()])
        save_file(tensors, os.path.join(out, os.path.basename(path)))
    return lp.shards(out)


def warm_python(files, dim, world):
    """Rank 0 of the split walked over files, then the loader's module
    caches and hints emptied (a real first rank has none), so that only
    the interpreter's and torch's first-run costs stay paid."""
    import gdunlock
    lp.sliced(gdunlock.safe_open, files, [(dim, 0, world)])
    from gdunlock import plans
    from gdunlock.walk_memory import memory
    memory.reset()
    plans.forget()


def top_functions(prof, n=40):
    """prof's n functions of most own time: [name, calls, own ms, cumulative ms]."""
    import pstats
    rows = sorted(pstats.Stats(prof).stats.items(), key=lambda kv: -kv[1][2])[:n]
    return [[f"{func}@{os.path.basename(path)}:{line}", calls, round(tt * 1e3, 3),
             round(ct * 1e3, 3)] for (path, line, func), (_, calls, tt, ct, _) in rows]


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
    warmed = variant in ("warm", "idle")  # idle is warm, then asleep
    if variant == "engine" or warmed:
        t0 = time.perf_counter()
        gdunlock.prepare(0).wait()
        out["prepare_s"] = time.perf_counter() - t0
    if variant == "alloc" or warmed:
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
    if warmed:
        lp.sliced(gdunlock.safe_open, files, [(dim, world - 1, world)])
    parts = variant.split(",")
    kept = []
    if "gpu" in parts:
        pinned = torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True)
        on_gpu = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
        for _ in range(3):
            on_gpu.copy_(pinned, non_blocking=True)
        kept += [pinned, on_gpu]
    if "block" in parts:
        torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")  # freed at once, cached
    if "python" in parts:
        warm_python(tiny_copy(folder, folder.rstrip("/") + "-tiny"), dim, world)
    torch.cuda.synchronize()
    if variant == "idle":
        time.sleep(1.0)
    profile = os.environ.get("GDU_FIRST_RANK_PROFILE") == "1"
    out["seconds"], out["blocks"] = [], []
    for rank in range(world):
        blocks = torch.cuda.memory_stats()["segment.all.allocated"]
        if profile and rank == 0:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out["bytes"] = lp.sliced(gdunlock.safe_open, files, [(dim, rank, world)])
        torch.cuda.synchronize()
        out["seconds"].append(time.perf_counter() - t0)
        if profile and rank == 0:
            prof.disable()
            out["profile_rank0"] = top_functions(prof)
        out["blocks"].append(torch.cuda.memory_stats()["segment.all.allocated"] - blocks)
    print(json.dumps(out))
    if variant in ("build", "overlap"):
        del params


if __name__ == "__main__":
    main()
