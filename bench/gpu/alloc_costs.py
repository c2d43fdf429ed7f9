#!/usr/bin/env python3
"""What torch's CUDA caching allocator pays for fresh blocks (issue 21: a
process's first rank allocates its results while later ranks reuse the
cached blocks). In a fresh process, after CUDA is up, one way of asking:

  small10   ten 1 MiB tensors, kept: torch's small pool, a 2 MiB segment
            (one cudaMalloc) per two of them
  padded10  one 64 MiB block allocated and freed, then ten tensors of 1 MiB
            and 512 bytes, which the large pool cuts out of it
  big1      one 240 MiB block (a rank's share of a shard at 8 ways)
  big4      four blocks of 240, 240, 240 and 60 MiB, kept
  mid1      one 20 MiB block

Usage: alloc_costs.py MODE; one JSON line: milliseconds (synchronized),
and the segments torch holds afterwards (one is torch's own first)."""
import json
import sys
import time

import torch

MIB = 1 << 20


def empty(n):
    return torch.empty(n, dtype=torch.uint8, device="cuda:0")


def main():
    mode = sys.argv[1]
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    keep = []
    t0 = time.perf_counter()
    if mode == "small10":
        keep = [empty(MIB) for _ in range(10)]
    elif mode == "padded10":
        empty(64 * MIB)
        keep = [empty(MIB + 512) for _ in range(10)]
    elif mode == "big1":
        keep = [empty(240 * MIB)]
    elif mode == "big4":
        keep = [empty(n * MIB) for n in (240, 240, 240, 60)]
    elif mode == "mid1":
        keep = [empty(20 * MIB)]
    else:
        sys.exit(f"unknown mode {mode}")
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    segments = torch.cuda.memory_stats().get("segment.all.allocated", 0)
    print(json.dumps({"mode": mode, "ms": round(ms, 3), "segments": segments,
                      "kept": len(keep)}))


if __name__ == "__main__":
    main()
