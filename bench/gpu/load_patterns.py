#!/usr/bin/env python3
"""Every way frameworks read weights, gdunlock beside safetensors (issue 21),
on a Llama-shaped checkpoint of about 5.8 GB (hidden 4096, 15 layers, bf16,
written by transformers' save_pretrained in 3 shards). Each case runs in a
fresh process (imports and the GPU's context made before the clock), the
loaders alternating, the order reversed every other round:

  whole      gdunlock.load_safetensors(index) | safetensors.torch.load_file per shard
  keys       safe_open + get_tensor of every key, device cuda:0
  rows-W     every rank r of W (2, 4, 8): get_slice(k)[r-th rows] of every 2-D
             tensor (tensor-parallel column-parallel layers), each rank timed
  cols-W     the same with [:, r-th columns] (row-parallel layers)
  all-4      every 4-way slice, rows and columns, of every 2-D tensor, one process
  iter-tp    weights_iterator(index, rank=r, world_size=4, shard={q/k/v/gate/up
             rows, o/down columns, embed/lm_head rows}), each rank timed
  iter-full  weights_iterator(index) with shard=None (what vLLM's loaders take)
  hf-bf16, hf-fp16, hf-auto
             AutoModelForCausalLM.from_pretrained(dir, dtype=bf16 | float16,
             device_map="cuda:0" | "auto"), plain (safetensors) and under
             gdunlock.patch(); logits of both compared bit for bit
  hf-floor   the same bf16 load with every tensor already on the GPU (a
             safe_open stand-in): transformers' own work, the floor
  cold       load_safetensors(index) with the page cache dropped first, beside
             `gdunlock bench --cold` host rows (parallel O_DIRECT reads) of the
             same shards and safetensors cold

Checks (PASS/FAIL/SKIP lines; results in OUT/load_patterns.{json,md}):
  patterns-rows-W, patterns-cols-W   every rank >= 0.8 x the whole-file load rate
                                     (bytes of results) and >= 3 x safetensors
  patterns-cols-vs-rows-W            columns cost at most 1.2 x rows, rank by rank
  patterns-keys                      >= 0.9 x whole
  patterns-all-4                     >= 3 x safetensors
  patterns-iter-tp                   every rank >= 0.8 x whole
  patterns-iter-full                 >= 0.9 x whole
  patterns-hf-*                      >= 3 x faster than plain, or <= 1.2 x the floor;
                                     logits identical
  patterns-cold                      >= 0.9 x bench's cold host rate

    python3 load_patterns.py --dir WORK --gdunlock BUILD/bin/gdunlock --out OUT
        [--rounds 3] [--cases whole,keys,...]
"""
import argparse
import hashlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# GDU_PATTERNS_LAYERS=32 gives it Llama-2-7B's depth (11.9 GB): a rank's costs
# that do not grow with its bytes weigh less there (keep its --dir apart).
MODEL = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
             num_hidden_layers=int(os.environ.get("GDU_PATTERNS_LAYERS", "15")),
             num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=2048,
             tie_word_embeddings=False)
TP_SHARD = {r"(q|k|v|gate|up)_proj\.weight$": 0, r"(o|down)_proj\.weight$": 1,
            r"(embed_tokens|lm_head)\.weight$": 0}
CASES = ["whole", "keys", "rows-2", "cols-2", "rows-4", "cols-4", "rows-8", "cols-8", "all-4",
         "iter-tp", "iter-full", "hf-bf16", "hf-fp16", "hf-auto", "hf-floor", "cold"]
LOADERS = {"whole": ["gd", "st"], "keys": ["gd", "st"], "all-4": ["gd", "st"],
           "iter-tp": ["gd"], "iter-full": ["gd"], "hf-floor": ["floor"],
           "cold": ["gd", "st", "bench"]}


def shards(folder):
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.endswith(".safetensors"))


# -- the checkpoint ------------------------------------------------------------------
def make(folder):
    """The model, written once (reused while MODEL is unchanged)."""
    stamp = os.path.join(folder, "patterns-model.json")
    want = json.dumps(MODEL, sort_keys=True)
    if os.path.exists(stamp) and open(stamp).read() == want:
        return
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        os.unlink(os.path.join(folder, f))
    torch.manual_seed(0)
    with torch.device("cuda:0"):
        model = AutoModelForCausalLM.from_config(LlamaConfig(**MODEL), dtype=torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    model.save_pretrained(folder, max_shard_size="2GB")
    with open(stamp, "w") as f:
        f.write(want)


# -- one case, in this (fresh) process -------------------------------------------------
def rank_index(shape, dim, rank, world):
    n = shape[dim]
    size = math.ceil(n / world)
    start = min(rank * size, n)
    return (slice(None),) * dim + (slice(start, min(start + size, n)),)


def nbytes(t):
    return t.numel() * t.element_size()


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def sliced(opener, files, parts):
    """Bytes of the slices (dim, rank, world) of every 2-D tensor of files,
    asked key by key, each shard opened in turn as serving engines do."""
    n = 0
    for path in files:
        with opener(path, framework="pt", device="cuda:0") as f:
            for k in f.keys():
                s = f.get_slice(k)
                shape = s.get_shape()
                if len(shape) == 2:
                    for dim, rank, world in parts:
                        n += nbytes(s[rank_index(shape, dim, rank, world)])
    return n


def one(case, loader, folder):
    import torch
    # Only gdunlock's own runs import it: imported after torch, it starts its
    # engine with CUDA, which the baselines' processes should not carry.
    if loader == "gd":
        import gdunlock
    import safetensors
    import safetensors.torch
    files = shards(folder)
    index = os.path.join(folder, "model.safetensors.index.json")
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    opener = gdunlock.safe_open if loader == "gd" else safetensors.safe_open
    out = {"case": case, "loader": loader, "seconds": [], "bytes": []}

    # A path prefix: each timing is profiled into PREFIX.CASE.LOADER.N (cProfile).
    profile = os.environ.get("GDU_PATTERNS_PROFILE")

    def clock(fn):
        if profile:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        got = fn()
        torch.cuda.synchronize()
        out["seconds"].append(time.perf_counter() - t0)
        out["bytes"].append(got)
        if profile:
            prof.disable()
            prof.dump_stats(f"{profile}.{case}.{loader}.{len(out['seconds']) - 1}")

    if case in ("whole", "cold"):
        if case == "cold":
            drop_caches()
        if loader == "gd":
            clock(lambda: sum(nbytes(t) for t in gdunlock.load_safetensors(index, device=0)
                              .values()))
        else:
            clock(lambda: sum(nbytes(t) for f in files
                              for t in safetensors.torch.load_file(f, device="cuda:0").values()))
    elif case == "keys":
        def keys():
            n = 0
            for path in files:
                with opener(path, framework="pt", device="cuda:0") as f:
                    for k in f.keys():
                        n += nbytes(f.get_tensor(k))
            return n
        clock(keys)
    elif re.fullmatch(r"(rows|cols)-\d", case):
        dim, world = (0 if case.startswith("rows") else 1), int(case[5:])
        for rank in range(world):
            clock(lambda: sliced(opener, files, [(dim, rank, world)]))
    elif case == "all-4":
        clock(lambda: sliced(opener, files, [(d, r, 4) for d in (0, 1) for r in range(4)]))
    elif case == "iter-tp":
        for rank in range(4):
            clock(lambda: sum(nbytes(t) for _, t in gdunlock.weights_iterator(
                index, device=0, rank=rank, world_size=4, shard=TP_SHARD)))
    elif case == "iter-full":
        clock(lambda: sum(nbytes(t) for _, t in gdunlock.weights_iterator(index, device=0)))
    elif case.startswith("hf"):
        hf(case, loader, folder, clock, out)
    print(json.dumps(out))


def hf(case, loader, folder, clock, out):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    dtype = torch.float16 if case == "hf-fp16" else torch.bfloat16
    device_map = "auto" if case == "hf-auto" else "cuda:0"
    # What from_pretrained imports on first use (transformers 5 imports
    # modeling_utils and the model's module lazily; on the H200 they pull in
    # torchvision): imported before the clock in every case, as the floor's
    # stand-in always did, so that the times compare loads, not imports.
    t0 = time.perf_counter()
    import transformers.modeling_utils  # noqa: F401
    AutoModelForCausalLM._model_mapping[type(transformers.AutoConfig.from_pretrained(folder))]
    out["imports_s"] = time.perf_counter() - t0
    if loader == "gd":
        import gdunlock
        gdunlock.patch()
    elif loader == "floor":
        install_floor(folder)
    model = {}

    def load():
        model["m"] = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype,
                                                          device_map=device_map)
        return sum(nbytes(p) for p in model["m"].parameters())
    clock(load)
    ids = torch.arange(1, 65, device="cuda:0")[None]
    with torch.no_grad():
        logits = model["m"](ids).logits.float().cpu()
    # bitwise identity of the logits, judged from the JSON alone (--judge)
    out["logits_sha256"] = hashlib.sha256(logits.numpy().tobytes()).hexdigest()
    out["transformers"] = transformers.__version__
    if loader == "gd":
        out["patched_reads"] = gdunlock.patching.stats() if hasattr(gdunlock.patching,
                                                                    "stats") else None


def install_floor(folder):
    """safe_open replaced by a stand-in that serves every tensor from GPU
    memory, loaded before the clock: what from_pretrained costs beyond I/O."""
    import safetensors
    import safetensors.torch
    import transformers.modeling_utils as mu
    loaded = {}
    for path in shards(folder):
        loaded[path] = safetensors.torch.load_file(path, device="cuda:0")

    class Slice:
        def __init__(self, t):
            self.t = t

        def __getitem__(self, index):
            return self.t[index]

        def get_shape(self):
            return list(self.t.shape)

        def get_dtype(self):
            return {"torch.bfloat16": "BF16"}.get(str(self.t.dtype), str(self.t.dtype))

    loaded = {os.path.realpath(p): t for p, t in loaded.items()}

    class StandIn:
        def __init__(self, filename, framework="pt", device="cpu", **kw):
            self.tensors = loaded[os.path.realpath(filename)]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def keys(self):
            return list(self.tensors)

        def metadata(self):
            return {"format": "pt"}

        def get_slice(self, k):
            return Slice(self.tensors[k])

        def get_tensor(self, k):
            return self.tensors[k]

    mu.safe_open = StandIn
    safetensors.safe_open = StandIn


# -- the driver -------------------------------------------------------------------------
def run_one(case, loader, a, env):
    if loader == "bench":
        return bench_cold(a, env)
    cmd = [sys.executable, os.path.abspath(__file__), "--one", case, "--loader", loader,
           "--dir", a.dir]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"case": case, "loader": loader, "error": (p.stderr or p.stdout).strip()[-600:]}


def bench_cold(a, env):
    """gdunlock bench's host row, --cold (O_DIRECT, page cache dropped), on
    every shard: bytes over seconds of all of them."""
    total, seconds, rows = 0, 0.0, []
    for path in shards(a.model):
        size = os.path.getsize(path) // (16 << 20) * (16 << 20)
        p = subprocess.run([a.gdunlock, "bench", "-f", path, "-s", str(size), "--cold",
                            "--paths", "host", "--rounds", "1", "--no-verify", "--json"],
                           capture_output=True, text=True, env=env, timeout=600)
        try:
            row = next(r for r in json.loads(p.stdout)["paths"] if r["path"] == "host")
        except (ValueError, KeyError, StopIteration):
            return {"case": "cold", "loader": "bench", "error": (p.stderr or p.stdout)[-400:]}
        rows.append(row)
        total += size
        seconds += size / (row["gbps"] * 1e9)
    return {"case": "cold", "loader": "bench", "seconds": [seconds], "bytes": [total],
            "rows": rows}


def report(verdict, check, evidence, out):
    evidence = " ".join(str(evidence).split())
    print(f"{verdict} {check}: {evidence}", flush=True)
    out.append({"verdict": verdict, "check": check, "evidence": evidence})


def rates(runs):
    """Per position (rank): the median GB/s over rounds, and the seconds."""
    by_pos = {}
    for r in runs:
        for i, (s, b) in enumerate(zip(r["seconds"], r["bytes"])):
            by_pos.setdefault(i, []).append((s, b))
    return [(b[0][1] / statistics.median(s for s, _ in b) / 1e9,
             statistics.median(s for s, _ in b)) for _, b in sorted(by_pos.items())]


def against(x, target):
    """x as a verdict line shows it: two decimals, three where two would
    print the target itself (0.796 against 0.8 is not "0.80")."""
    return f"{x:.3f}" if f"{x:.2f}" == f"{target:.2f}" else f"{x:.2f}"


def verdicts(a, res, checks):
    def gbps(case, loader):
        runs = [r for r in res["runs"] if r["case"] == case and r["loader"] == loader
                and "error" not in r]
        return rates(runs) if runs else None

    whole = gbps("whole", "gd")
    if not whole:
        report("FAIL", "patterns-whole", "no whole-file load finished", checks)
        return
    base = whole[0][0]
    st_whole = gbps("whole", "st")
    report("PASS" if st_whole and base >= 5 * st_whole[0][0] else "FAIL", "patterns-whole",
           f"load_safetensors {base:.2f} GB/s vs safetensors.torch.load_file "
           f"{st_whole[0][0] if st_whole else 0:.2f} GB/s (target >= 5 x); the whole-file "
           f"rate below", checks)
    for case, target, what in (("keys", 0.9, "get_tensor of every key"),
                               ("iter-full", 0.9, "weights_iterator, shard=None")):
        g = gbps(case, "gd")
        if g is None:
            continue
        st = gbps(case, "st")
        report("PASS" if g[0][0] >= target * base else "FAIL", f"patterns-{case}",
               f"{what} {g[0][0]:.2f} GB/s = {against(g[0][0] / base, target)} x whole {base:.2f} "
               f"(target >= {target})" + (f"; safetensors {st[0][0]:.2f} GB/s = "
                                          f"{g[0][0] / st[0][0]:.1f} x" if st else ""), checks)
    for world in (2, 4, 8):
        per = {}
        for dim in ("rows", "cols"):
            g, st = gbps(f"{dim}-{world}", "gd"), gbps(f"{dim}-{world}", "st")
            if g is None:
                continue
            per[dim] = g
            worst = min(range(len(g)), key=lambda i: g[i][0])
            vs_st = min(g[i][0] / st[i][0] for i in range(len(g))) if st else 0
            ok = g[worst][0] >= 0.8 * base and vs_st >= 3
            report("PASS" if ok else "FAIL", f"patterns-{dim}-{world}",
                   f"ranks {', '.join(f'{x[0]:.2f}' for x in g)} GB/s of results; slowest "
                   f"rank {worst} = {against(g[worst][0] / base, 0.8)} x whole {base:.2f} "
                   f"(target >= 0.8); vs safetensors {', '.join(f'{x[0]:.2f}' for x in st or [])}: "
                   f"at least {vs_st:.1f} x (target >= 3)", checks)
        if "rows" in per and "cols" in per:
            worst = max(c[1] / r[1] for r, c in zip(per["rows"], per["cols"]))
            report("PASS" if worst <= 1.2 else "FAIL", f"patterns-cols-vs-rows-{world}",
                   f"columns take at most {against(worst, 1.2)} x the time of rows, rank by rank "
                   f"(target <= 1.2)", checks)
    g, st = gbps("all-4", "gd"), gbps("all-4", "st")
    if g and st:
        report("PASS" if g[0][0] >= 3 * st[0][0] else "FAIL", "patterns-all-4",
               f"every 4-way slice, rows and columns: {g[0][1]:.3f} s vs safetensors "
               f"{st[0][1]:.3f} s = {g[0][0] / st[0][0]:.1f} x (target >= 3)", checks)
    g = gbps("iter-tp", "gd")
    if g:
        worst = min(x[0] for x in g)
        report("PASS" if worst >= 0.8 * base else "FAIL", "patterns-iter-tp",
               f"weights_iterator rank 0..3 of 4 with TP shard rules: "
               f"{', '.join(f'{x[0]:.2f}' for x in g)} GB/s yielded; slowest "
               f"{against(worst / base, 0.8)} x whole (target >= 0.8)", checks)
    floor = gbps("hf-floor", "floor")
    for case in ("hf-bf16", "hf-fp16", "hf-auto"):
        g, st = gbps(case, "gd"), gbps(case, "st")
        if not g or not st:
            continue
        same = logits_equal(res, case)
        speedup = st[0][1] / g[0][1]
        vs_floor = g[0][1] / floor[0][1] if floor else float("inf")
        ok = same and (speedup >= 3 or vs_floor <= 1.2)
        report("PASS" if ok else "FAIL", f"patterns-{case}",
               f"from_pretrained under patch() {g[0][1]:.3f} s vs plain {st[0][1]:.3f} s = "
               f"{against(speedup, 3)} x faster (target >= 3) or "
               f"{against(vs_floor, 1.2)} x the floor {floor[0][1] if floor else 0:.3f} s "
               f"(target <= 1.2); logits {'identical' if same else 'DIFFER'}", checks)
    g, b, st = gbps("cold", "gd"), gbps("cold", "bench"), gbps("cold", "st")
    if g and b:
        report("PASS" if g[0][0] >= 0.9 * b[0][0] else "FAIL", "patterns-cold",
               f"load_safetensors, page cache dropped: {g[0][0]:.2f} GB/s vs gdunlock bench "
               f"--cold host {b[0][0]:.2f} GB/s = {against(g[0][0] / b[0][0], 0.9)} x "
               f"(target >= 0.9)" + (f"; safetensors cold {st[0][0]:.2f} GB/s" if st else ""),
               checks)


def logits_equal(res, case):
    """Whether every gdunlock and plain run of case made the same logits."""
    sums = {r["loader"]: set() for r in res["runs"] if r["case"] == case}
    for r in res["runs"]:
        if r["case"] == case and "logits_sha256" in r:
            sums[r["loader"]].add(r["logits_sha256"])
    return len(sums.get("gd", ())) == 1 and sums.get("gd") == sums.get("st")


def still_to_run(plan, rounds, runs):
    """(round, case, loader) of every run of plan [(case, loader)] not in
    runs yet, in order: every other round backwards, so that each case's
    loaders alternate which goes first."""
    done = {(x.get("round"), x["case"], x["loader"]) for x in runs}
    return [(r, case, loader) for r in range(rounds)
            for case, loader in (plan if r % 2 == 0 else plan[::-1])
            if (r, case, loader) not in done]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--one")
    ap.add_argument("--loader")
    ap.add_argument("--dir", default="/var/tmp/gdu-patterns")
    ap.add_argument("--gdunlock")
    ap.add_argument("--out", default=".")
    ap.add_argument("--rounds", type=int, default=3)  # of two, the median is the mean
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--judge", help="a load_patterns.json (a run cut short keeps its runs so "
                    "far): print its verdicts again")
    ap.add_argument("--resume", help="a load_patterns.json cut short: its runs are kept and "
                    "only the others are made (a benchmark longer than one command's limit "
                    "runs in two)")
    a = ap.parse_args()
    a.model = os.path.join(a.dir, "model")
    if a.one:
        return one(a.one, a.loader, a.model)
    if a.judge:
        with open(a.judge) as f:
            res = json.load(f)
        verdicts(a, res, [])
        return None
    t0 = time.time()
    make(a.model)
    print(f"# model: {len(shards(a.model))} shards, "
          f"{sum(os.path.getsize(p) for p in shards(a.model)) / 1e9:.2f} GB "
          f"({time.time() - t0:.0f} s)", flush=True)
    env = dict(os.environ)
    for path in shards(a.model):  # warm every shard once
        with open(path, "rb", buffering=0) as f:
            while f.read(64 << 20):
                pass
    cases = [c for c in a.cases.split(",") if c]
    plan = [(c, l) for c in cases for l in LOADERS.get(c, ["gd", "st"])]
    res = {"runs": [], "model": MODEL, "cases": cases}
    if a.resume:
        with open(a.resume) as f:
            res["runs"] = [x for x in json.load(f)["runs"] if "error" not in x]
    os.makedirs(a.out, exist_ok=True)
    for r, case, loader in still_to_run(plan, a.rounds, res["runs"]):
        x = run_one(case, loader, a, env)
        x["round"] = r
        res["runs"].append(x)
        if case == "cold":  # the next warm case finds the files cached again
            for path in shards(a.model):
                with open(path, "rb", buffering=0) as f:
                    while f.read(64 << 20):
                        pass
        with open(os.path.join(a.out, "load_patterns.json"), "w") as f:
            json.dump(res, f, indent=1)  # the runs so far, should the run be cut short
        print(f"# round {r}: {case} {loader}: " + (
            f"error {x['error'][-200:]}" if "error" in x else
            ", ".join(f"{s:.3f} s" for s in x["seconds"])), flush=True)
    checks = []
    res["checks"] = checks
    for x in res["runs"]:
        if "error" in x:
            report("FAIL" if x["loader"] in ("gd", "bench") else "SKIP",
                   f"patterns-run-{x['case']}-{x['loader']}", x["error"][-300:], checks)
    verdicts(a, res, checks)
    res["machine"] = {"host": platform.node(),
                      "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                      "elapsed_s": time.time() - t0}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "load_patterns.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
