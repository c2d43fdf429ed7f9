#!/usr/bin/env python3
"""NCCL all-reduce through torch.distributed with the sums compared exactly
(issue 15: pairs where copy-engine copies pass while NCCL deadlocks or
returns wrong sums). One process per GPU (at most two), the NCCL backend,
integer-valued int32, float32 and int64 tensors at sizes that pick NCCL's
LL, LL128 and Simple protocols; each rank's result must equal the sum the
CPU computes. NCCL's own log (NCCL_DEBUG=INFO, into files) says which
transport carried the peer traffic (P2P/CUMEM, P2P/IPC, SHM, NVLS, ...). A
run that does not finish in time is a deadlock and fails.

Prints PASS/FAIL/SKIP lines for tests/gpu/run.sh; with --out, a JSON summary.
usage: p2p_nccl.py [--out FILE.json] [--timeout S] [--label NAME]
(NCCL's environment passes through: NCCL_P2P_DISABLE=1 gives the control run.)"""
import argparse
import glob
import json
import os
import re
import statistics
import sys
import tempfile
import time

# (bytes per rank, what NCCL uses for it on one node)
SIZES = [(1 << 10, "LL"), (256 << 10, "LL128"), (64 << 20, "Simple")]
DTYPES = ["int32", "float32", "int64"]
TIMED = 5


def line(kind, check, text):
    print(f"{kind} {check}: {text}", flush=True)


def values(torch, dtype, rank, n, device):
    """Integer values whose sum over ranks is exact in every dtype (float32:
    below 2**24)."""
    i = torch.arange(n, dtype=torch.int64, device=device)
    if dtype == "int64":
        v = i * 1000003 + rank * (1 << 40)
    else:
        v = (i * 7 + rank * 13) % 100000
    return v.to(getattr(torch, dtype))


def worker(rank, world, init_file, out_dir):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    results = []
    for nbytes, proto in SIZES:
        for dtype in DTYPES:
            elem = torch.tensor([], dtype=getattr(torch, dtype)).element_size()
            n = nbytes // elem
            t = values(torch, dtype, rank, n, dev)
            dist.all_reduce(t)
            torch.cuda.synchronize(dev)
            want = sum(values(torch, dtype, r, n, "cpu").to(torch.int64) for r in range(world))
            got = t.cpu().to(torch.int64)
            bad = (got != want).nonzero()
            first = None
            if bad.numel():
                k = int(bad[0][0])
                first = {"index": k, "got": int(got[k]), "want": int(want[k])}
            samples = []
            if dtype == "float32":  # bandwidth of one dtype per size is enough
                for _ in range(TIMED):
                    torch.cuda.synchronize(dev)
                    t0 = time.perf_counter()
                    dist.all_reduce(t)
                    torch.cuda.synchronize(dev)
                    samples.append(time.perf_counter() - t0)
            results.append({"bytes": nbytes, "protocol_expected": proto, "dtype": dtype,
                            "exact": first is None, "first_mismatch": first,
                            "seconds_median": statistics.median(samples) if samples else None})
    dist.barrier()
    dist.destroy_process_group()
    v = torch.cuda.nccl.version()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "results": results, "torch": torch.__version__,
                   "nccl": ".".join(map(str, v)) if isinstance(v, tuple) else str(v)}, f)


def transports(log_dir):
    """The channel transports NCCL's INFO log names ("via P2P/CUMEM/read")."""
    seen = set()
    for path in glob.glob(os.path.join(log_dir, "nccl.*.log")):
        with open(path, errors="replace") as f:
            for text in f:
                m = re.search(r"\bvia (\S+)", text)
                if m and ("Channel" in text or "Connected" in text):
                    seen.add(m.group(1))
    return sorted(seen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--label", default="default")
    a = ap.parse_args()
    check = f"p2p-nccl-{a.label}"
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        line("SKIP", check, f"no torch: {e}")
        return 0
    if not torch.cuda.is_available() or not torch.distributed.is_nccl_available():
        line("SKIP", check, "torch has no CUDA or no NCCL here")
        return 0
    world = min(2, torch.cuda.device_count())
    work = tempfile.mkdtemp(prefix="gdu-nccl-")
    init_file = os.path.join(work, "init")
    os.environ.setdefault("NCCL_DEBUG", "INFO")
    os.environ["NCCL_DEBUG_FILE"] = os.path.join(work, "nccl.%h.%p.log")
    start = time.time()
    ctx = mp.start_processes(worker, args=(world, init_file, work), nprocs=world, join=False,
                             start_method="spawn")
    finished, error = False, None
    try:
        while not finished and time.time() - start < a.timeout:
            finished = ctx.join(timeout=1)
    except Exception as e:  # a worker raised: its traceback is in the exception
        finished, error = True, str(e).strip().splitlines()[-1]
    if not finished:
        for p in ctx.processes:
            p.kill()
        line("FAIL", check, f"{world} rank(s) did not finish within {a.timeout:.0f} s "
                            "(deadlock?); NCCL logs in " + work)
        return 0
    if error:
        line("FAIL", check, f"a rank failed: {error}")
        return 0
    ranks = []
    for r in range(world):
        with open(os.path.join(work, f"rank{r}.json")) as f:
            ranks.append(json.load(f))
    via = transports(work)
    wrong = [(r["rank"], x) for r in ranks for x in r["results"] if not x["exact"]]
    big = [x for x in ranks[0]["results"] if x["seconds_median"] and x["bytes"] == SIZES[-1][0]]
    bw = ""
    if big:
        bw = (f"; {SIZES[-1][0] >> 20} MiB float32 all-reduce "
              f"{SIZES[-1][0] / big[0]['seconds_median'] / 1e9:.1f} GB/s "
              f"(algorithm bandwidth, median of {TIMED})")
    summary = {"label": a.label, "world": world, "torch": ranks[0]["torch"],
               "nccl": ranks[0]["nccl"], "transports": via, "seconds": time.time() - start,
               "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
               "ranks": ranks}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(summary, f, indent=2)
    cases = f"{len(DTYPES)} dtypes x {', '.join(f'{b >> 10} KiB' for b, _ in SIZES)}"
    if wrong:
        r, x = wrong[0]
        line("FAIL", check, f"rank {r}: {x['dtype']} {x['bytes']} bytes: element "
                            f"{x['first_mismatch']['index']} is {x['first_mismatch']['got']}, "
                            f"the sum is {x['first_mismatch']['want']} ({len(wrong)} case(s) "
                            f"wrong of {cases} per rank)")
    elif world == 1:
        line("PASS", check, f"one rank: NCCL {ranks[0]['nccl']} (torch {ranks[0]['torch']}) "
                            f"initialises and all-reduce is exact over {cases}{bw}")
        line("SKIP", f"{check}-pair", "one GPU: no peer traffic (needs nvidia-h200-x2)")
    else:
        line("PASS", check, f"{world} ranks, NCCL {ranks[0]['nccl']}: all-reduce sums exact over "
                            f"{cases} on every rank; transports: {', '.join(via) or '?'}{bw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
