#!/usr/bin/env python3
"""What a fresh process pays in CUDA before a loader's steady rate (issue 12,
item 4): the calls the engine makes when it starts, each timed in a process
that has only created its context. Straight to libcuda through ctypes, so that
no loader's own choices are in the numbers.

Prints one JSON document: milliseconds per call (each of N in order, so the
first can be told from the rest), the wall time of the same calls made by
several threads at once (whether the driver serialises them), one pin of all
the staging at once, and whether pinning or allocating waits for copies in
flight."""
import ctypes
import json
import sys
import threading
import time

cu = ctypes.CDLL("libcuda.so.1")
c_ptr = ctypes.c_void_p
c_dptr = ctypes.c_uint64


def check(r, what):
    if r != 0:
        raise SystemExit(f"{what}: CUresult {r}")


def ms(f):
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1e3


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    slots = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    chunk = int(sys.argv[3]) if len(sys.argv) > 3 else 4 << 20
    n = threads * slots
    out = {"threads": threads, "slots_per_thread": slots, "chunk_bytes": chunk}
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = c_ptr()
    out["ctx_retain_ms"] = ms(lambda: check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                                            "cuDevicePrimaryCtxRetain"))
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    streams = [c_ptr() for _ in range(threads)]
    out["stream_create_ms"] = [ms(lambda s=s: check(cu.cuStreamCreate(ctypes.byref(s), 0),
                                                    "cuStreamCreate")) for s in streams]
    events = [c_ptr() for _ in range(n)]
    out["event_create_ms"] = [ms(lambda e=e: check(cu.cuEventCreate(ctypes.byref(e), 2),
                                                   "cuEventCreate")) for e in events]
    cu.cuMemHostAlloc.argtypes = [ctypes.POINTER(c_ptr), ctypes.c_size_t, ctypes.c_uint]
    host = [c_ptr() for _ in range(n)]
    out["host_alloc_serial_ms"] = [ms(lambda h=h: check(cu.cuMemHostAlloc(ctypes.byref(h), chunk, 1),
                                                        "cuMemHostAlloc")) for h in host]
    for h in host:
        cu.cuMemFreeHost(h)

    # The same allocations from `threads` threads at once.
    def alloc_some(bufs):
        check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        for h in bufs:
            check(cu.cuMemHostAlloc(ctypes.byref(h), chunk, 1), "cuMemHostAlloc")

    host = [c_ptr() for _ in range(n)]
    parts = [host[i::threads] for i in range(threads)]
    t = time.perf_counter()
    ts = [threading.Thread(target=alloc_some, args=(p,)) for p in parts]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    out["host_alloc_parallel_wall_ms"] = (time.perf_counter() - t) * 1e3

    # malloc'd memory pinned by cuMemHostRegister instead.
    libc = ctypes.CDLL("libc.so.6")
    libc.aligned_alloc.restype = c_ptr
    libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    cu.cuMemHostRegister_v2.argtypes = [c_ptr, ctypes.c_size_t, ctypes.c_uint]
    plain = [libc.aligned_alloc(4096, chunk) for _ in range(n)]
    for p in plain:
        ctypes.memset(p, 0, chunk)  # touched, as a read into it would
    out["host_register_serial_ms"] = [ms(lambda p=p: check(cu.cuMemHostRegister_v2(p, chunk, 1),
                                                           "cuMemHostRegister")) for p in plain]

    # Device memory: one large allocation, then copies into it.
    cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(c_dptr), ctypes.c_size_t]
    dst = c_dptr()
    big = 8 << 30
    out["device_alloc_8GiB_ms"] = ms(lambda: check(cu.cuMemAlloc_v2(ctypes.byref(dst), big),
                                                   "cuMemAlloc"))
    cu.cuMemcpyHtoDAsync_v2.argtypes = [c_dptr, c_ptr, ctypes.c_size_t, c_ptr]

    def copy(i, s):
        check(cu.cuMemcpyHtoDAsync_v2(dst.value + i * chunk, host[i % n], chunk, s), "HtoDAsync")
        check(cu.cuStreamSynchronize(s), "cuStreamSynchronize")

    out["first_copy_per_stream_ms"] = [ms(lambda i=i, s=s: copy(i, s)) for i, s in enumerate(streams)]
    out["later_copy_ms"] = [ms(lambda i=i: copy(threads + i, streams[0])) for i in range(8)]
    k = min(256, big // chunk)
    t = time.perf_counter()
    for i in range(k):
        check(cu.cuMemcpyHtoDAsync_v2(dst.value + i * chunk, host[i % n], chunk, streams[i % threads]),
              "HtoDAsync")
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    out["h2d_steady_gbps"] = k * chunk / (time.perf_counter() - t) / 1e9
    # Does pinning or allocating wait for copies in flight on other streams
    # (the CUDA guide's implicit synchronisation)? Each call is timed alone
    # (idle) and again right after 1 GiB of copies was queued on every
    # stream; "copies_done" says whether they had all finished by the time
    # the call returned.
    copies = min(256, big // chunk)

    def queue_copies():
        for i in range(copies):
            check(cu.cuMemcpyHtoDAsync_v2(dst.value + i * chunk, host[i % n], chunk,
                                          streams[i % threads]), "HtoDAsync")

    def copies_done():
        return all(cu.cuStreamQuery(s) == 0 for s in streams)

    def during_copy(call):
        idle = ms(call)
        queue_copies()
        busy = ms(call)
        done = copies_done()
        t = time.perf_counter()
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        return {"idle_ms": idle, "busy_ms": busy, "copies_done": done,
                "left_ms": (time.perf_counter() - t) * 1e3}

    spare = [libc.aligned_alloc(4096, chunk) for _ in range(2)]
    for p in spare:
        ctypes.memset(p, 0, chunk)
    spare_it = iter(spare)
    out["register_during_copy"] = during_copy(
        lambda: check(cu.cuMemHostRegister_v2(next(spare_it), chunk, 1), "cuMemHostRegister"))
    extra = [c_dptr(), c_dptr()]
    extra_it = iter(extra)
    out["device_alloc_256MiB_during_copy"] = during_copy(
        lambda: check(cu.cuMemAlloc_v2(ctypes.byref(next(extra_it)), 256 << 20), "cuMemAlloc"))
    one = libc.aligned_alloc(4096, n * chunk)
    ctypes.memset(one, 0, n * chunk)
    out["host_register_one_region_ms"] = ms(
        lambda: check(cu.cuMemHostRegister_v2(one, n * chunk, 1), "cuMemHostRegister"))
    for key in ("stream_create_ms", "event_create_ms", "host_alloc_serial_ms",
                "host_register_serial_ms"):
        v = out[key]
        out[key.replace("_ms", "_total_ms")] = sum(v)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
