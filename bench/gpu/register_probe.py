"""Probe (issue 21): can the GPU's copy engine gather a rank's columns
itself, straight out of the page cache, and what does registering the
file's mapping with cuMemHostRegister(READ_ONLY) cost? Page cache warm
first; one JSON line per measurement.

    python3 bench/gpu/register_probe.py gather FILE
        registers the first 256 MiB of FILE's mapping, then all of it, and
        copies with cuMemcpy2D 1 KiB of every 8 KiB (an 8-way column slice
        of a 4096-wide bf16 weight), 2 KiB of every 8 KiB (4-way) and the
        whole range to the GPU, three times each; then unregisters
    python3 bench/gpu/register_probe.py scaling FILE
        1, 4 and 12 threads register and unregister disjoint chunks (16,
        64 MiB) of the mapping: GB/s of the file, median ms of a chunk

Results: bench/results/2026-12-04-h200-column-dma-probe.md."""
import argparse
import ctypes
import json
import os
import statistics
import threading
import time

import torch

PROT_READ, MAP_SHARED = 1, 1
CU_MEMHOSTREGISTER_READ_ONLY = 0x08
CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE = 1, 2


class Memcpy2D(ctypes.Structure):
    """CUDA_MEMCPY2D of cuda.h (64-bit)."""
    _fields_ = [("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t),
                ("srcMemoryType", ctypes.c_int), ("srcHost", ctypes.c_void_p),
                ("srcDevice", ctypes.c_uint64), ("srcArray", ctypes.c_void_p),
                ("srcPitch", ctypes.c_size_t), ("dstXInBytes", ctypes.c_size_t),
                ("dstY", ctypes.c_size_t), ("dstMemoryType", ctypes.c_int),
                ("dstHost", ctypes.c_void_p), ("dstDevice", ctypes.c_uint64),
                ("dstArray", ctypes.c_void_p), ("dstPitch", ctypes.c_size_t),
                ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t)]


assert ctypes.sizeof(Memcpy2D) == 128


def driver():
    """(libcuda, libc) with the calls the probes make, torch's CUDA (the
    primary context) started and current on this thread."""
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    cu.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
    cu.cuMemcpy2D_v2.argtypes = [ctypes.POINTER(Memcpy2D)]
    cu.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    cu.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return cu, libc


def ms_since(t):
    return round((time.perf_counter() - t) * 1e3, 3)


def gather(cu, libc, fd, file_size):
    full = file_size // (2 << 20) * (2 << 20)
    dst = torch.empty(full, dtype=torch.uint8, device="cuda:0")
    for size in (256 << 20, full):
        ptr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
        out = {"bytes": size}
        t = time.perf_counter()
        out["register_rc"] = cu.cuMemHostRegister_v2(ptr, size, CU_MEMHOSTREGISTER_READ_ONLY)
        out["register_ms"] = ms_since(t)
        if out["register_rc"] == 0:
            for name, width, pitch in (("cols-8", 1024, 8192), ("cols-4", 2048, 8192),
                                       ("whole", size, size)):
                rows = size // pitch
                copy = Memcpy2D(srcMemoryType=CU_MEMORYTYPE_HOST, srcHost=ptr, srcPitch=pitch,
                                dstMemoryType=CU_MEMORYTYPE_DEVICE, dstDevice=dst.data_ptr(),
                                dstPitch=width, WidthInBytes=width, Height=rows)
                ms = []
                for _ in range(3):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    rc = cu.cuMemcpy2D_v2(ctypes.byref(copy))
                    torch.cuda.synchronize()
                    ms.append(ms_since(t))
                out[name] = {"rc": rc, "ms": ms,
                             "gbps_of_pieces": round(width * rows / min(ms) / 1e6, 2)}
            t = time.perf_counter()
            cu.cuMemHostUnregister(ptr)
            out["unregister_ms"] = ms_since(t)
        libc.munmap(ptr, size)
        print(json.dumps(out), flush=True)


def scaling(cu, libc, fd, file_size):
    ctx = ctypes.c_void_p()
    cu.cuCtxGetCurrent(ctypes.byref(ctx))
    size = file_size // (64 << 20) * (64 << 20)
    ptr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
    for chunk in (16 << 20, 64 << 20):
        for threads in (1, 4, 12):
            starts = list(range(0, size, chunk))
            register, unregister, errors = [], [], []

            def work(mine):
                cu.cuCtxSetCurrent(ctx)
                for s in mine:
                    t = time.perf_counter()
                    rc = cu.cuMemHostRegister_v2(ptr + s, chunk, CU_MEMHOSTREGISTER_READ_ONLY)
                    register.append(time.perf_counter() - t)
                    if rc:
                        errors.append(rc)
                        continue
                    t = time.perf_counter()
                    cu.cuMemHostUnregister(ptr + s)
                    unregister.append(time.perf_counter() - t)

            workers = [threading.Thread(target=work, args=(starts[i::threads],))
                       for i in range(threads)]
            t0 = time.perf_counter()
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            seconds = time.perf_counter() - t0
            print(json.dumps({
                "threads": threads, "chunk_mib": chunk >> 20,
                "gbps_of_file": round(size / seconds / 1e9, 1),
                "register_ms": round(statistics.median(register) * 1e3, 3),
                "unregister_ms": round(statistics.median(unregister) * 1e3, 3) if unregister
                else None,
                "errors": sorted(set(errors))}), flush=True)
    libc.munmap(ptr, size)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("probe", choices=("gather", "scaling"))
    ap.add_argument("file")
    a = ap.parse_args()
    cu, libc = driver()
    fd = os.open(a.file, os.O_RDONLY)
    try:
        (gather if a.probe == "gather" else scaling)(cu, libc, fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
