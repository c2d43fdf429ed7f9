#!/usr/bin/env python3
"""PyTorch's own GPU-to-GPU tensor copy bandwidth, for comparison with
`gdunlock p2p`: t.to('cuda:1') of a large tensor, and dst.copy_(src) both
ways, timed with CUDA events on the source GPU's current stream (PyTorch
issues cross-device copies there, after enabling peer access itself).
Writes a JSON summary (GB/s = 1e9 bytes/s; median, min, max of the samples)."""
import argparse
import json
import statistics
import sys


def stat(samples):
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def timed(torch, src_dev, fn, reps, iters, nbytes):
    stream = torch.cuda.current_stream(src_dev)
    fn()  # warm-up (and allocator caching for .to())
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    samples = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(src_dev):
            start.record(stream)
            for _ in range(reps):
                fn()
            end.record(stream)
        end.synchronize()
        ms = start.elapsed_time(end)
        samples.append(nbytes * reps / (ms * 1e-3) / 1e9)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    return stat(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=256 << 20, help="bytes per copy")
    ap.add_argument("--iters", type=int, default=5, help="timed samples")
    ap.add_argument("--reps", type=int, default=5, help="copies per sample")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"no torch: {e}", file=sys.stderr)
        return 2
    if torch.cuda.device_count() < 2:
        print("fewer than two GPUs", file=sys.stderr)
        return 3
    src0 = torch.randint(0, 255, (a.size,), dtype=torch.uint8, device="cuda:0")
    src1 = torch.randint(0, 255, (a.size,), dtype=torch.uint8, device="cuda:1")
    dst0 = torch.empty_like(src1, device="cuda:0")
    dst1 = torch.empty_like(src0, device="cuda:1")
    res = {
        "torch": torch.__version__,
        "size_bytes": a.size,
        "iters": a.iters,
        "reps": a.reps,
        "can_access_peer": bool(torch.cuda.can_device_access_peer(0, 1)),
        "to_gbps": timed(torch, 0, lambda: src0.to("cuda:1"), a.reps, a.iters, a.size),
        "copy_0to1_gbps": timed(torch, 0, lambda: dst1.copy_(src0), a.reps, a.iters, a.size),
        "copy_1to0_gbps": timed(torch, 1, lambda: dst0.copy_(src1), a.reps, a.iters, a.size),
    }
    res["data_ok"] = bool(torch.equal(dst1.cpu(), src0.cpu()) and torch.equal(dst0.cpu(), src1.cpu()))
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
