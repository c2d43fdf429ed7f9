#!/usr/bin/env python3
"""PyTorch through the gdunlock shim (tests/gpu/shim.sh, check c).

Allocates CUDA tensors of many sizes in three rounds, frees half of them
after each round (and empties PyTorch's cache once), and prints a checksum of
what the tensors hold: it must be the same with and without the shim. Where
the shim is loaded it also asks it, for every live tensor, to prove through
RM that the tensor's GPU memory is registered.

Lines: CHECKSUM <n>, PROBED <n> REGISTERED <n> [<first failure>], DONE."""
import ctypes
import sys

import torch

SIZES = [1, 7, 512, 4096, 65536, 1 << 20, (1 << 20) + 3, 3 << 20, 16 << 20, 64 << 20, 200 << 20]


def shim_probe():
    try:
        fn = ctypes.CDLL(None).gdunlock_test_probe_registered
    except AttributeError:
        return None
    fn.argtypes = [ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_uint)]
    fn.restype = ctypes.c_int
    return fn


def main():
    if not torch.cuda.is_available():
        print("NOGPU: torch sees no CUDA device")
        return 69
    dev = torch.device("cuda:0")
    probe = shim_probe()
    live, checksum, probed, registered, first_bad = [], 0, 0, 0, ""
    for rnd in range(3):
        for i, n in enumerate(SIZES):
            t = (torch.arange(n, dtype=torch.int64, device=dev) % 251 + i + rnd).to(torch.int32)
            live.append(t)
        torch.cuda.synchronize()
        if probe is not None:
            for t in live:
                status = ctypes.c_uint(0)
                r = probe(t.data_ptr(), ctypes.byref(status))
                probed += 1
                if r == 1:
                    registered += 1
                elif not first_bad:
                    first_bad = "tensor of %d elements at 0x%x: probe %d status 0x%x" % (
                        t.numel(), t.data_ptr(), r, status.value)
        for t in live:
            checksum = (checksum * 1000003 + int(t.sum().item())) % (1 << 61)
        live = live[::2]
        if rnd == 1:
            torch.cuda.empty_cache()
    print("CHECKSUM %d" % checksum)
    if probe is not None:
        print("PROBED %d REGISTERED %d %s" % (probed, registered, first_bad))
    print("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
