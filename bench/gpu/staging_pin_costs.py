#!/usr/bin/env python3
"""What pinning the engine's staging costs a fresh process (issue 21): in a
process whose only CUDA work so far is torch's context, 96 MiB of anonymous
memory (2 MiB-aligned, advised into transparent huge pages, touched page by
page, as src/io/io_staging.c makes the engine's) registered with
cuMemHostRegister in one of these ways, each timed:

  one96       one registration of the whole (reg96_ms)
  tiny_first  a 4 KiB registration first (tiny_ms): whether the first
              registration of a process pays a fixed cost
  halves      two of 48 MiB (reg48a_ms, reg48b_ms): the engine's two parts
  one48       48 MiB alone (reg48a_ms)
  quarters    four of 24 MiB (reg24_ms)
  hostalloc   no region of its own: cuMemHostAlloc of 48 MiB, then of 48
              MiB more (alloc48a_ms, alloc48b_ms), the driver's pinned
              memory instead of registered memory

or, with `prepare`, how long gdunlock.prepare(0).wait() takes (prepare_ms;
GDUNLOCK_IO_* set the engine). Straight to libcuda through ctypes.

    python3 staging_pin_costs.py pin one96 | python3 staging_pin_costs.py prepare LABEL

Prints one JSON line."""
import ctypes
import json
import mmap
import os
import sys
import time

MIB = 1 << 20
VARIANTS = ("one96", "tiny_first", "halves", "one48", "quarters", "hostalloc")


def region(n):
    """(mapping, address, offset): n bytes of the mapping at a 2 MiB
    boundary, advised into huge pages."""
    m = mmap.mmap(-1, n + 2 * MIB)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    off = (-base) % (2 * MIB)
    m.madvise(mmap.MADV_HUGEPAGE, off, n)
    return m, base + off, off


def touch(m, off, n):
    """Milliseconds to write one byte of every 4 KiB page."""
    t = time.perf_counter()
    for o in range(off, off + n, 4096):
        m[o] = 1
    return (time.perf_counter() - t) * 1e3


def pins(variant):
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]

    def register(addr, n):
        t = time.perf_counter()
        r = cu.cuMemHostRegister_v2(addr, n, 1)  # CU_MEMHOSTREGISTER_PORTABLE
        if r != 0:
            raise SystemExit(f"cuMemHostRegister of {n} bytes: CUresult {r}")
        return (time.perf_counter() - t) * 1e3

    if variant == "hostalloc":
        cu.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                      ctypes.c_uint]
        out = {}
        for part in ("a", "b"):
            p = ctypes.c_void_p()
            t = time.perf_counter()
            r = cu.cuMemHostAlloc(ctypes.byref(p), 48 * MIB, 1)  # CU_MEMHOSTALLOC_PORTABLE
            out[f"alloc48{part}_ms"] = (time.perf_counter() - t) * 1e3
            if r != 0:
                raise SystemExit(f"cuMemHostAlloc of 48 MiB: CUresult {r}")
        return out

    m, a, off = region(96 * MIB)
    out = {"touch_ms": touch(m, off, 96 * MIB)}
    if variant == "tiny_first":
        t, ta, toff = region(2 * MIB)
        touch(t, toff, 4096)
        out["tiny_ms"] = register(ta, 4096)
        out["reg96_ms"] = register(a, 96 * MIB)
    elif variant == "one96":
        out["reg96_ms"] = register(a, 96 * MIB)
    elif variant == "halves":
        out["reg48a_ms"] = register(a, 48 * MIB)
        out["reg48b_ms"] = register(a + 48 * MIB, 48 * MIB)
    elif variant == "one48":
        out["reg48a_ms"] = register(a, 48 * MIB)
    else:
        out["reg24_ms"] = [register(a + i * 24 * MIB, 24 * MIB) for i in range(4)]
    return out


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("pin", "prepare") or (
            sys.argv[1] == "pin" and (len(sys.argv) < 3 or sys.argv[2] not in VARIANTS)):
        raise SystemExit(__doc__)
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    out = {"mode": sys.argv[1], "variant": sys.argv[2] if len(sys.argv) > 2 else "",
           "env": {k: v for k, v in os.environ.items() if k.startswith("GDUNLOCK_IO")}}
    if sys.argv[1] == "pin":
        out.update(pins(sys.argv[2]))
    else:
        import gdunlock
        t = time.perf_counter()
        gdunlock.prepare(0).wait()
        out["prepare_ms"] = (time.perf_counter() - t) * 1e3
        out["lib"] = gdunlock.library_path()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
