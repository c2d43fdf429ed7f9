"""Probe (issue 21): does cuMemHostRegister(READ_ONLY) of a page-cache
mapping scale with threads? T threads (1, 4, 12) register and unregister
disjoint CHUNK ranges (16, 64 MiB) of FILE's mapping; one JSON line per
(T, CHUNK): GB/s of the file registered and unregistered, and the median
register and unregister milliseconds of a chunk. Page cache warm first.

    python3 tests/gpu/register_scaling_probe.py FILE

Results: bench/results/2026-12-04-h200-column-dma-probe.md."""
import ctypes, json, os, statistics, sys, threading, time
import torch
torch.cuda.init(); torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
cu = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
cu.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
cu.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
cu.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
ctx = ctypes.c_void_p(); cu.cuCtxGetCurrent(ctypes.byref(ctx))
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size // (64 << 20) * (64 << 20)
ptr = libc.mmap(None, size, 1, 1, fd, 0)
for chunk in (16 << 20, 64 << 20):
    for T in (1, 4, 12):
        starts = list(range(0, size, chunk))
        reg, unreg, errs = [], [], []
        def work(mine):
            cu.cuCtxSetCurrent(ctx)
            for s in mine:
                t = time.perf_counter(); rc = cu.cuMemHostRegister_v2(ptr + s, chunk, 0x08)
                reg.append(time.perf_counter() - t)
                if rc: errs.append(rc); continue
                t = time.perf_counter(); cu.cuMemHostUnregister(ptr + s); unreg.append(time.perf_counter() - t)
        th = [threading.Thread(target=work, args=(starts[i::T],)) for i in range(T)]
        t0 = time.perf_counter()
        for x in th: x.start()
        for x in th: x.join()
        s = time.perf_counter() - t0
        print(json.dumps({"threads": T, "chunk_mib": chunk >> 20, "gbps_of_file": round(size / s / 1e9, 1),
                          "register_ms": round(statistics.median(reg) * 1e3, 3),
                          "unregister_ms": round(statistics.median(unreg) * 1e3, 3) if unreg else None,
                          "errors": sorted(set(errs))}), flush=True)
