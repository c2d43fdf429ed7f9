#!/usr/bin/env python3
"""Where one rank's slices spend their time (issue 21): every rank of one
split of the checkpoint load_patterns.py makes, in order, in this fresh
process, through gdunlock.safe_open (rows/cols, as load_patterns.py asks
them) or weights_iterator with the TP rules (iter-tp). The caller's thread
is clocked in parts: safe_open's opens and closes, engine acquisitions,
torch allocations and the blocks reserved ahead of them, engine submits,
placements of queued reads, waits for reads; "py" is the rest (the
read-ahead's bookkeeping and the caller's own loop). The engine's workers
run beside it; a rank whose waits are small is bound by this thread.

Usage: rank_timeline.py MODEL_DIR CASE VARIANT
  CASE     rows-W | cols-W (W ways) | iter-tp (4 ways)
  VARIANT  plain | win (the read-ahead window starts at its largest)
One JSON line per rank: milliseconds in all and by part, the longest
waits and opens (milliseconds, and when they began)."""
import importlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load_patterns as lp  # noqa: E402

CLOCKED = [("safe_open", "__init__", "open"), ("safe_open", "close", "close"),
           ("RangeReader", "__init__", "acquire"), ("Target", "empty", "alloc"),
           ("Target", "reserve", "reserve"), ("RangeReader", "_queue", "submit"),
           ("RangeReader", "_place", "place"), ("Pending", "wait", "wait")]


def clock(owner, attr, part, spent, events):
    """owner.attr timed into spent[part] (and events, for opens, closes,
    waits, allocations and reserved blocks)."""
    original = getattr(owner, attr)

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            t1 = time.perf_counter()
            spent[part] = spent.get(part, 0.0) + t1 - t0
            spent[part + "_n"] = spent.get(part + "_n", 0) + 1
            if part in ("open", "close", "wait", "alloc", "reserve"):
                events.append((part, t0, t1))
    setattr(owner, attr, timed)


def main():
    folder, case, variant = sys.argv[1], sys.argv[2], sys.argv[3]
    import torch
    import gdunlock
    so = importlib.import_module("gdunlock.safe_open")
    rd = importlib.import_module("gdunlock.reader")
    walk = importlib.import_module("gdunlock.walk")
    target = importlib.import_module("gdunlock.target")
    files = lp.shards(folder)
    index = os.path.join(folder, "model.safetensors.index.json")
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    if variant == "win":
        walk.FIRST_WINDOW = so.DEFAULT_READAHEAD
    spent, events = {}, []
    owners = {"safe_open": so.safe_open, "Target": target.Target, "RangeReader": rd.RangeReader,
              "Pending": rd.Pending}
    for owner, attr, part in CLOCKED:
        clock(owners[owner], attr, part, spent, events)

    def rank_bytes(rank):
        if case == "iter-tp":
            return sum(lp.nbytes(t) for _, t in gdunlock.weights_iterator(
                index, device=0, rank=rank, world_size=4, shard=lp.TP_SHARD))
        dim, world = (0 if case.startswith("rows") else 1), int(case[5:])
        return lp.sliced(gdunlock.safe_open, files, [(dim, rank, world)])
    world = 4 if case == "iter-tp" else int(case[5:])
    for rank in range(world):
        spent.clear()
        events.clear()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        n = rank_bytes(rank)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        inner = sum(spent.get(k, 0.0)
                    for k in ("open", "close", "alloc", "reserve", "submit", "place", "wait"))
        longest = sorted(((round((b - a) * 1e3, 2), part, round((a - t0) * 1e3, 2))
                          for part, a, b in events), reverse=True)[:8]
        print(json.dumps({"case": case, "variant": variant, "rank": rank, "gb": n / 1e9,
                          "ms": round((t2 - t0) * 1e3, 2), "tail_sync_ms": round((t2 - t1) * 1e3, 2),
                          "py_ms": round((t1 - t0 - inner) * 1e3, 2),
                          "parts": {k: v if k.endswith("_n") else round(v * 1e3, 2)
                                    for k, v in spent.items()},
                          "longest": longest}))


if __name__ == "__main__":
    main()
