"""Probe (issue 21): can the GPU's copy engine gather a rank's columns
itself, straight out of the page cache? Registers a read-only mapping of
FILE (first 256 MiB, then all of it) with cuMemHostRegister(READ_ONLY) and
times that, then cuMemcpy2D of 1 KiB out of every 8 KiB (an 8-way column
slice of a 4096-wide bf16 weight), 2 of 8 KiB (4-way) and the whole range,
and the unregistration; one JSON line per size. Page cache warm first.

    python3 tests/gpu/register_gather_probe.py FILE

Results: bench/results/2026-12-04-h200-column-dma-probe.md."""
import ctypes, json, os, sys, time
import torch
torch.cuda.init(); torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
cu = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
cu.cuMemHostUnregister.argtypes = [ctypes.c_void_p]

class M2D(ctypes.Structure):
    _fields_ = [("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t), ("srcMemoryType", ctypes.c_int),
                ("srcHost", ctypes.c_void_p), ("srcDevice", ctypes.c_uint64), ("srcArray", ctypes.c_void_p),
                ("srcPitch", ctypes.c_size_t), ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t),
                ("dstMemoryType", ctypes.c_int), ("dstHost", ctypes.c_void_p), ("dstDevice", ctypes.c_uint64),
                ("dstArray", ctypes.c_void_p), ("dstPitch", ctypes.c_size_t), ("WidthInBytes", ctypes.c_size_t),
                ("Height", ctypes.c_size_t)]
assert ctypes.sizeof(M2D) == 128  # CUDA_MEMCPY2D in cuda.h, 64-bit
cu.cuMemcpy2D_v2.argtypes = [ctypes.POINTER(M2D)]
path = sys.argv[1]
fd = os.open(path, os.O_RDONLY)
full = os.fstat(fd).st_size // (2 << 20) * (2 << 20)
dst = torch.empty(full, dtype=torch.uint8, device="cuda:0")
def now(): return time.perf_counter()
for size in (256 << 20, full):
    ptr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    out = {"bytes": size}
    t = now(); rc = cu.cuMemHostRegister_v2(ptr, size, 0x08); out["register_ms"] = round((now() - t) * 1e3, 2); out["register_rc"] = rc
    if rc == 0:
        for name, width, pitch in (("cols-8", 1024, 8192), ("cols-4", 2048, 8192), ("whole", size, size)):
            h = size // pitch
            m = M2D(srcMemoryType=1, srcHost=ptr, srcPitch=pitch, dstMemoryType=2, dstDevice=dst.data_ptr(),
                    dstPitch=width, WidthInBytes=width, Height=h)
            ms = []
            for _ in range(3):
                torch.cuda.synchronize(); t = now(); r = cu.cuMemcpy2D_v2(ctypes.byref(m)); torch.cuda.synchronize()
                ms.append(round((now() - t) * 1e3, 2))
            out[name] = {"rc": r, "ms": ms, "gbps_of_pieces": round(width * h / min(ms) / 1e6, 2)}
        t = now(); cu.cuMemHostUnregister(ptr); out["unregister_ms"] = round((now() - t) * 1e3, 2)
    print(json.dumps(out), flush=True)
