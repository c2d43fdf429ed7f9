#!/usr/bin/env python3
"""GPU check of `gdunlock load`, all measured in one run over the checkpoint
made by load_make_checkpoint.py, page cache warm:

  - safetensors.torch.load_file(path, device="cuda:0")     (the baseline)
  - gdunlock.load_safetensors(path, device=0)              (ours, Python)
  - the engine's raw read of the same bytes into a preallocated buffer
  - `gdunlock load PATH --json`, and once with --verify     (ours, CLI)
  - torch.equal of every tensor, ours vs the safetensors library
  - GPU memory held while any tensor of a file lives, freed with the last one
  - the sharded checkpoint on GPUs 0,1 (round-robin) when two are present
  - device="cpu" on one shard

Prints PASS/FAIL/SKIP lines and writes load_results.json and
load_results.md to --out."""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import safetensors
import torch
from safetensors.torch import load_file

import gdunlock
from gdunlock import engine

GIB = 1 << 30
results = {"checks": []}


def report(verdict, check, evidence):
    line = f"{verdict} {check}: {evidence}"
    print(line, flush=True)
    results["checks"].append({"verdict": verdict, "check": check, "evidence": evidence})


def warm(paths):
    """Reads the files once so that every measurement sees a warm page cache."""
    t0, total = time.perf_counter(), 0
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                b = f.read(64 << 20)
                if not b:
                    break
                total += len(b)
    return total, time.perf_counter() - t0


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def free(*objs):
    for o in objs:
        if isinstance(o, dict):
            o.clear()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def same(o, r):
    """torch.equal, or byte equality for dtypes torch.equal lacks (float8 on
    some versions); byte equality is the stricter of the two."""
    try:
        return torch.equal(o, r)
    except (RuntimeError, NotImplementedError):
        byte_compared = results.setdefault("byte_compared_dtypes", [])
        if str(r.dtype) not in byte_compared:
            byte_compared.append(str(r.dtype))
        return torch.equal(o.reshape(-1).view(torch.uint8), r.reshape(-1).view(torch.uint8))


def equal_count(ours, ref, device=None):
    """(equal, total, first names that differ) under torch.equal."""
    bad = []
    for name, r in ref.items():
        o = ours.get(name)
        if device is not None and o is not None:
            o = o.to(device)
        if o is None or o.dtype != r.dtype or o.shape != r.shape:
            bad.append(name)
        elif not same(o, r):
            raw_equal = torch.equal(o.reshape(-1).view(torch.uint8), r.reshape(-1).view(torch.uint8))
            bad.append(name + (" (bytes equal: NaNs?)" if raw_equal else ""))
    return len(ref) - len(bad), len(ref), bad[:5]


def breakdown(path):
    """One more load, timed by stage: headers, allocation + transfer (the C
    loader's own clock), wrapping as torch tensors. Returns the tensors."""
    from gdunlock.torch_bridge import to_torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ckpt = gdunlock.Checkpoint(path)
    t1 = time.perf_counter()
    ckpt.load(0)
    t2 = time.perf_counter()
    out = {info.name: to_torch(ckpt, i, info) for i, info in enumerate(ckpt.tensors())}
    stats = ckpt.stats()
    ckpt.close()
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    results["breakdown"] = {"open_s": t1 - t0, "load_s": t2 - t1, "wrap_s": t3 - t2,
                            "total_s": t3 - t0, "loader_stats": stats}
    return out


def check_memory_release(path, tbytes):
    """The file's GPU allocation lives while any of its tensors does and is
    freed with the last one (the DLPack deleters' reference count)."""
    def free_bytes():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return torch.cuda.mem_get_info(0)[0]

    before = free_bytes()
    tensors = gdunlock.load_safetensors(path, device=0)
    loaded = free_bytes()
    keep = tensors["model.norm.weight"]
    tensors.clear()
    one_left = free_bytes()
    keep_ok = bool((keep == 1).all())
    del keep
    after = free_bytes()
    used, held, back = before - loaded, before - one_left, after - before
    results["memory_release"] = {"before": before, "loaded": loaded, "one_left": one_left,
                                 "after": after}
    ok = used >= tbytes and held >= tbytes and abs(back) < (64 << 20) and keep_ok
    report("PASS" if ok else "FAIL", "load-free",
           f"GPU memory in use: {used / GIB:.2f} GiB loaded, {held / GIB:.2f} GiB while one "
           f"tensor lives (its values intact: {keep_ok}), {-back / GIB:+.3f} GiB after the last")


def header_span(path):
    with gdunlock.Checkpoint(path) as c:
        tensors = c.tensors()
        lo = min(t.file_offset for t in tensors)
        hi = max(t.file_offset + t.nbytes for t in tensors)
        return lo, hi - lo, len(tensors), sum(t.nbytes for t in tensors), \
            sorted({t.dtype for t in tensors})


def run_cli(binary, args):
    p = subprocess.run([binary, "load", *args, "--json"], capture_output=True, text=True)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {"error": {"message": p.stderr.strip()[-400:]}}
    return p.returncode, doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--gdunlock", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    path = os.path.join(a.dir, "model.safetensors")
    index = os.path.join(a.dir, "sharded", "model.safetensors.index.json")
    shard_files = sorted(os.path.join(a.dir, "sharded", f)
                         for f in os.listdir(os.path.join(a.dir, "sharded"))
                         if f.endswith(".safetensors"))
    ngpu = torch.cuda.device_count()
    results["machine"] = {
        "host": platform.node(), "gpus": [torch.cuda.get_device_name(i) for i in range(ngpu)],
        "torch": torch.__version__, "safetensors": safetensors.__version__,
        "python": platform.python_version(),
        "SAFETENSORS_FAST_CUDA": os.environ.get("SAFETENSORS_FAST_CUDA", "unset"),
        "GDUNLOCK_IO": {k: v for k, v in os.environ.items() if k.startswith("GDUNLOCK_IO_")},
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    offset, span, count, tbytes, dtypes = header_span(path)
    results["checkpoint"] = {"path": path, "tensors": count, "tensor_bytes": tbytes,
                             "gib": tbytes / GIB, "dtypes": dtypes}
    report("PASS" if tbytes >= 8 * GIB and count >= 100 and len(dtypes) >= 4 else "FAIL",
           "load-checkpoint", f"{tbytes / GIB:.2f} GiB, {count} tensors, dtypes {dtypes}")
    wbytes, wsec = warm([path] + shard_files)
    results["warmup"] = {"bytes": wbytes, "seconds": wsec}
    for i in range(ngpu):
        torch.zeros(1, device=f"cuda:{i}")

    # The baseline, measured first and kept as the reference tensors.
    st_times, ref = [], None
    for _ in range(2):
        out, t = timed(lambda: load_file(path, device="cuda:0"))
        st_times.append(t)
        if ref is None:
            ref = out
        else:
            free(out)
    # Ours and the raw engine read, interleaved so that both see the same
    # state. Each side keeps one engine across its runs (the loader keeps its
    # own for the process), so only ours' first run pays for creating one.
    raw = torch.empty(span, dtype=torch.uint8, device="cuda:0")
    ours_times, raw_times, ours, reason = [], [], None, ""
    with engine.Engine(device=0) as raw_engine:
        for i in range(a.repeat):
            t, reason = raw_engine.read(path, offset, span, raw.data_ptr())
            raw_times.append(t)
            if ours is not None:
                free(ours)
            ours, t = timed(lambda: gdunlock.load_safetensors(path, device=0))
            ours_times.append(t)
    del raw
    free(ours)
    ours = breakdown(path)
    best = {"safetensors": min(st_times), "gdunlock": min(ours_times), "engine": min(raw_times)}
    gbps = {k: tbytes / v / 1e9 for k, v in best.items()}
    results["timings"] = {"seconds": {"safetensors": st_times, "gdunlock": ours_times,
                                      "engine": raw_times}, "best_gbps": gbps,
                          "engine_reason": reason}
    speedup = best["safetensors"] / best["gdunlock"]
    vs_engine = best["engine"] / best["gdunlock"]
    report("PASS" if speedup >= 3 else "FAIL", "load-vs-safetensors",
           f"gdunlock {gbps['gdunlock']:.2f} GB/s vs safetensors.load_file "
           f"{gbps['safetensors']:.2f} GB/s = {speedup:.2f}x (target >= 3x)")
    report("PASS" if vs_engine >= 0.9 else "FAIL", "load-vs-engine",
           f"gdunlock {gbps['gdunlock']:.2f} GB/s vs engine raw read {gbps['engine']:.2f} GB/s "
           f"= {vs_engine:.2f}x (target >= 0.9x; engine path: {reason})")

    eq, total, bad = equal_count(ours, ref)
    results["equal"] = {"equal": eq, "total": total, "differ": bad}
    report("PASS" if eq == total and len(ours) == total else "FAIL", "load-equal",
           f"{eq}/{total} tensors torch.equal to safetensors' (ours has {len(ours)})"
           + (f"; differ: {bad}" if bad else ""))
    free(ours, ref)

    check_memory_release(path, tbytes)

    rc, doc = run_cli(a.gdunlock, [path])
    rc2, doc2 = run_cli(a.gdunlock, [path, "--verify"])
    results["cli"] = {"plain": doc, "verify": doc2}
    ok = rc == 0 and rc2 == 0 and (doc2.get("verify") or {}).get("ok") is True
    stages = ", ".join(f"{k} {v:.3f}" for k, v in (doc.get("stages_seconds") or {}).items())
    report("PASS" if ok else "FAIL", "load-cli",
           f"gdunlock load --json: exit {rc}, {doc.get('gbps', 0):.2f} GB/s via "
           f"{doc.get('backend', '?')} (one process, seconds by stage: {stages}); --verify: "
           f"exit {rc2}, {(doc2.get('verify') or doc2.get('error') or {}).get('message', '?')}")

    # Sharded: on GPUs 0,1 round-robin when there are two, else on GPU 0.
    gpus = [0, 1] if ngpu >= 2 else [0]
    ref = {}
    for f in shard_files:
        ref.update(load_file(f, device="cuda:0"))
    sh, t = timed(lambda: gdunlock.load_safetensors(index, device=gpus))
    placed = sorted({v.device.index for v in sh.values()})
    eq, total, bad = equal_count(sh, ref, device="cuda:0")
    sbytes = sum(v.numel() * v.element_size() for v in ref.values())
    results["sharded"] = {"gpus": gpus, "placed_on": placed, "seconds": t,
                          "gbps": sbytes / t / 1e9, "equal": eq, "total": total}
    free(sh, ref)
    if ngpu >= 2:
        rc, doc = run_cli(a.gdunlock, [index, "--gpu", "0,1", "--verify"])
        results["sharded"]["cli"] = doc
        ok = placed == [0, 1] and eq == total and rc == 0
        report("PASS" if ok else "FAIL", "load-2gpu",
               f"{len(shard_files)} shards on GPUs {placed}, {eq}/{total} tensors equal, "
               f"{sbytes / t / 1e9:.2f} GB/s; CLI --gpu 0,1 --verify exit {rc}")
    else:
        report("PASS" if eq == total else "FAIL", "load-sharded",
               f"{len(shard_files)} shards on GPU 0, {eq}/{total} tensors equal")
        report("SKIP", "load-2gpu", "one GPU on this machine")

    cpu = gdunlock.load_safetensors(shard_files[0], device="cpu")
    ref = load_file(shard_files[0], device="cpu")
    eq, total, bad = equal_count(cpu, ref)
    rc, doc = run_cli(a.gdunlock, [shard_files[0], "--to", "host", "--verify"])
    pinned = doc.get("memory") == "pinned host memory"
    verified = (doc.get("verify") or {}).get("ok") is True
    report("PASS" if eq == total and rc == 0 and pinned and verified else "FAIL", "load-cpu",
           f"device='cpu': {eq}/{total} tensors equal to safetensors' CPU load; CLI --to host "
           f"--verify: exit {rc}, {doc.get('memory', '?')}, verify "
           f"{'OK' if verified else 'not OK'}")


def write_results(out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "load_results.json"), "w") as f:
        json.dump(results, f, indent=2)
    if "timings" in results:
        with open(os.path.join(out, "load_results.md"), "w") as f:
            f.write(markdown())


def markdown():
    r, m = results, results["machine"]
    g = r["timings"]["best_gbps"]
    lines = [
        "# gdunlock load: safetensors checkpoint to GPU, warm page cache", "",
        f"{m['date']}, {m['host']}, {', '.join(m['gpus'])}; torch {m['torch']}, "
        f"safetensors {m['safetensors']} (SAFETENSORS_FAST_CUDA {m['SAFETENSORS_FAST_CUDA']})",
        "", f"Checkpoint: {r['checkpoint']['gib']:.2f} GiB, {r['checkpoint']['tensors']} tensors, "
        f"dtypes {', '.join(r['checkpoint']['dtypes'])}. Command: `tests/gpu/run.sh load`.", "",
        "| path | best GB/s | seconds (each run; gdunlock's first creates its engine) |",
        "| --- | --- | --- |",
    ]
    for k, label in (("safetensors", "safetensors.torch.load_file(device='cuda:0')"),
                     ("gdunlock", "gdunlock.load_safetensors(device=0)"),
                     ("engine", "engine raw read, same bytes")):
        runs = ", ".join(f"{s:.3f}" for s in r["timings"]["seconds"][k])
        lines.append(f"| {label} | {g[k]:.2f} | {runs} |")
    b = r.get("breakdown")
    if b:
        st = b.get("loader_stats", {})
        lines += ["", f"One more gdunlock load, by stage: headers {b['open_s']:.3f} s, allocation "
                  f"+ transfer {b['load_s']:.3f} s (the loader's clock: allocation "
                  f"{st.get('alloc_seconds', 0):.3f} s, engine creation "
                  f"{st.get('engine_seconds', 0):.3f} s, transfer {st.get('transfer_seconds', 0):.3f} s, "
                  f"overlapping), torch wrapping {b['wrap_s']:.3f} s."]
    lines += ["", f"Engine path: {r['timings']['engine_reason']}", "", "| check | verdict | evidence |",
              "| --- | --- | --- |"]
    lines += [f"| {c['check']} | {c['verdict']} | {c['evidence']} |" for c in r["checks"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "."
    try:
        main()
    except Exception as e:  # report, then let load.sh see the failure
        report("FAIL", "load-bench", f"{type(e).__name__}: {e}")
        raise
    finally:
        write_results(out)
