#!/usr/bin/env python3
"""Where the first load_safetensors of a fresh process spends the time its
later loads do not (issue 12, item 4): three loads in one process, each split
into opening the checkpoint (headers), the C loader's own stages (device
allocation, engine start, transfer; gdu_st_model_stats) and handing the
tensors to torch (DLPack views). Before the first, optionally, one warm-up
that could take its extra cost away:
  --warm-up FILE      a load of FILE (a small file: the engine and library
                      start; another checkpoint: a whole load)
  --warm-engine FILE  FILE read whole through a separate engine into a torch
                      buffer (pipeline and pinned staging busy, none of the
                      loader's own device allocations)
  --prealloc GIB      that much video memory allocated, written, freed
  --busy-copy MS      pinned host-to-device copies for MS ms (copy engines,
                      PCIe link)
  --busy-cpu MS       every CPU spinning for MS ms (idle cores)
--fresh-copy GIB times no load: pinned copies into freshly allocated video
memory, then into the same amount allocated again after a free. Prints one
JSON document."""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

import gdunlock
from gdunlock.checkpoint import Checkpoint
from gdunlock.torch_bridge import to_torch


def one_load(path):
    t0 = time.perf_counter()
    ckpt = Checkpoint(path)
    t1 = time.perf_counter()
    ckpt.load(0)
    t2 = time.perf_counter()
    tensors = {info.name: to_torch(ckpt, i, info) for i, info in enumerate(ckpt.tensors())}
    t3 = time.perf_counter()
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    stats = ckpt.stats()
    ckpt.close()
    n = sum(x.numel() * x.element_size() for x in tensors.values())
    ms = lambda s: round(s * 1e3, 3)  # noqa: E731
    return tensors, {
        "total_ms": ms(t4 - t0), "gbps": round(n / (t4 - t0) / 1e9, 2),
        "open_ms": ms(t1 - t0), "load_ms": ms(t2 - t1), "to_torch_ms": ms(t3 - t2),
        "sync_ms": ms(t4 - t3), "c_alloc_ms": ms(stats["alloc_seconds"]),
        "c_engine_ms": ms(stats["engine_seconds"]),
        "c_transfer_ms": ms(stats["transfer_seconds"]), "c_total_ms": ms(stats["seconds"]),
        "backend": stats["backend"]}


def copy_gbps(total, src):
    dst = torch.empty(total, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
    t = time.perf_counter()
    for off in range(0, total, src.numel()):
        dst[off:off + src.numel()].copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    s = time.perf_counter() - t
    del dst
    torch.cuda.empty_cache()
    return round(total / s / 1e9, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--warm-up", help="a small .safetensors file loaded first, untimed")
    ap.add_argument("--prealloc", type=float, default=0, help="GiB of device memory used first")
    ap.add_argument("--fresh-copy", type=float, default=0,
                    help="GiB copied into fresh, then reused, device memory; no loads")
    ap.add_argument("--busy-copy", type=float, default=0, help="ms of H2D copies just before")
    ap.add_argument("--busy-cpu", type=float, default=0, help="ms of spinning on every CPU just before")
    ap.add_argument("--warm-engine", help="a file read whole through a separate engine first")
    a = ap.parse_args()
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    if a.fresh_copy:
        src = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
        total = int(a.fresh_copy * (1 << 30))
        print(json.dumps({"fresh_copy_gib": a.fresh_copy,
                          "gbps": [copy_gbps(total, src) for _ in range(3)]}))
        return
    if a.prealloc:
        x = torch.ones(int(a.prealloc * (1 << 30)), dtype=torch.uint8, device="cuda:0")
        torch.cuda.synchronize()
        del x
        torch.cuda.empty_cache()
    out = {"warm_up": a.warm_up is not None, "prealloc_gib": a.prealloc,
           "busy_copy_ms": a.busy_copy, "busy_cpu_ms": a.busy_cpu}
    out["warm_engine"] = a.warm_engine is not None
    if a.warm_engine:
        from gdunlock.engine import Engine
        size = os.path.getsize(a.warm_engine)
        buf = torch.empty(size, dtype=torch.uint8, device="cuda:0")
        with Engine(device=0) as e:
            e.read(a.warm_engine, 0, size, buf.data_ptr())
        torch.cuda.synchronize()
        del buf
        torch.cuda.empty_cache()
    if a.busy_cpu:
        spin = f"import time\nend = time.perf_counter() + {a.busy_cpu / 1e3}\n" \
               "while time.perf_counter() < end:\n    pass\n"
        procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count())]
        for p in procs:
            p.wait()
    if a.busy_copy:
        src = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()
        dst = torch.empty(64 << 20, dtype=torch.uint8, device="cuda:0")
        end = time.perf_counter() + a.busy_copy / 1e3
        while time.perf_counter() < end:
            dst.copy_(src, non_blocking=True)
            torch.cuda.synchronize()
        del src, dst
    if a.warm_up:
        w = gdunlock.load_safetensors(a.warm_up, device=0)
        torch.cuda.synchronize()
        del w
    for k in ("first", "second", "third"):
        tensors, out[k] = one_load(a.checkpoint)
        del tensors
        torch.cuda.empty_cache()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
