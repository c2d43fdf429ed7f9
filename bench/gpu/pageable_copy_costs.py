#!/usr/bin/env python3
"""Whether a process's first reads could move before the engine's staging
is pinned (issue 21): in a fresh process whose only CUDA work so far is
torch's context, T threads copy a cached file's bytes to the GPU straight
from a mapping of the file, pageable memory the driver stages itself
(cuMemcpyHtoD_v2, 4 MiB a call, each thread its own part and device
buffer), optionally while another thread registers 48 MiB of freshly
touched memory (cuMemHostRegister, what the engine's start does), to see
whether the two wait for each other. Straight to libcuda through ctypes;
ctypes lets go of the GIL during each call.

    python3 pageable_copy_costs.py FILE THREADS MIB_PER_THREAD [pin]

Prints one JSON line: GB/s of the copies, their seconds, and with `pin`
the registration's milliseconds and when it began and ended against the
copies' clock."""
import ctypes
import json
import mmap
import os
import sys
import threading
import time

MIB = 1 << 20
PIECE = 4 * MIB


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    path, threads, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) * MIB
    pin = len(sys.argv) > 4 and sys.argv[4] == "pin"
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    ctx = ctypes.c_void_p()
    if cu.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
        raise SystemExit("no current CUDA context after torch's start")
    size = os.path.getsize(path)
    if threads * per > size:
        raise SystemExit(f"{path}: {size} bytes, fewer than {threads} x {per}")
    # mapped through libc for its address (Python's mmap gives none of a
    # read-only mapping), populated before the clock
    libc = ctypes.CDLL(None)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    fd = os.open(path, os.O_RDONLY)
    base = libc.mmap(None, threads * per, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    libc.madvise(ctypes.c_void_p(base), ctypes.c_size_t(threads * per), 22)  # MADV_POPULATE_READ
    bufs = [torch.empty(per, dtype=torch.uint8, device="cuda:0") for _ in range(threads)]
    torch.cuda.synchronize()
    out = {"threads": threads, "bytes": threads * per, "pin": pin}
    failed, ends = [], []

    def copy(t):
        cu.cuCtxSetCurrent(ctx)
        dev = bufs[t].data_ptr()
        for off in range(0, per, PIECE):
            r = cu.cuMemcpyHtoD_v2(dev + off, base + t * per + off, PIECE)
            if r != 0:
                failed.append(f"cuMemcpyHtoD_v2: {r}")
                break
        ends.append(time.perf_counter())

    if pin:
        region = mmap.mmap(-1, 50 * MIB)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(region))
        addr2 = (addr + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)
        region.madvise(mmap.MADV_HUGEPAGE, addr2 - addr, 48 * MIB)
        for o in range(addr2 - addr, addr2 - addr + 48 * MIB, 4096):
            region[o] = 1

    def register():
        cu.cuCtxSetCurrent(ctx)
        t = time.perf_counter()
        out["pin_begin_ms"] = (t - t0) * 1e3
        r = cu.cuMemHostRegister_v2(addr2, 48 * MIB, 1)
        out["pin_end_ms"] = (time.perf_counter() - t0) * 1e3
        out["pin_ms"] = (time.perf_counter() - t) * 1e3
        if r != 0:
            failed.append(f"cuMemHostRegister: {r}")

    workers = [threading.Thread(target=copy, args=(t,)) for t in range(threads)]
    if pin:
        workers.append(threading.Thread(target=register))
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    s = max(ends) - t0
    out.update({"seconds": s, "gbps": threads * per / s / 1e9, "failed": failed[:1]})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
