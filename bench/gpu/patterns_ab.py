#!/usr/bin/env python3
"""Variants of the loader against each other on the pattern benchmark's
cases (issue 21): each case of load_patterns.py run by gdunlock in a fresh
process per (round, case, variant), the variants in turn and their order
reversed every other round, so that a machine's drift falls on all of them
alike. A variant is NAME=VAR=VALUE[,VAR=VALUE...], the environment of its
processes: GDUNLOCK_IO_WORKERS=12, PYTHONPATH=DIR (another tree's Python),
GDUNLOCK_LOAD_LIB=FILE (another library); NAME= alone runs as this process
does.

    python3 patterns_ab.py --dir WORK --cases rows-8,cols-8 --rounds 2 \\
        --variant w16=GDUNLOCK_IO_WORKERS=16 --variant w12=GDUNLOCK_IO_WORKERS=12 \\
        --out OUT

The checkpoint is load_patterns.py's (made in WORK/model when missing),
page cache warm. Writes OUT/patterns_ab.jsonl (one line per process: the
variant, the round, the case's result) and prints, for each case and
variant, every process's first rank (and their median) and the median of
its later ranks in milliseconds, then in how many rounds each variant's
first rank was shorter than the first variant's: a split's first rank is
what each tensor-parallel process pays, since each of them is a first
rank."""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import load_patterns as lp  # noqa: E402


def parse_variant(text):
    """(name, {VAR: VALUE}) of NAME=VAR=VALUE[,VAR=VALUE...]; ValueError
    naming what is wrong."""
    name, sep, settings = text.partition("=")
    if not sep or not name:
        raise ValueError(f"variant {text!r}: NAME=VAR=VALUE[,VAR=VALUE...] or NAME=")
    env = {}
    for item in filter(None, settings.split(",")):
        var, sep, value = item.partition("=")
        if not sep or not var:
            raise ValueError(f"variant {name}: {item!r} is not VAR=VALUE")
        env[var] = value
    return name, env


def order(variants, round_no):
    """The variants in the order round round_no runs them."""
    return list(variants) if round_no % 2 == 0 else list(variants)[::-1]


def summarize(lines):
    """{case: {variant: ([first rank ms of each process], [median of the
    later ranks ms of each process])}} of patterns_ab.jsonl's lines, in the
    order the cases and variants first appear; processes that failed are
    left out."""
    out = {}
    for line in lines:
        result = line["result"]
        if "error" in result or not result.get("seconds"):
            continue
        seconds = [s * 1e3 for s in result["seconds"]]
        firsts, laters = out.setdefault(result["case"], {}).setdefault(line["variant"],
                                                                         ([], []))
        firsts.append(seconds[0])
        if len(seconds) > 1:
            laters.append(statistics.median(seconds[1:]))
    return out


def paired(lines, base):
    """{case: {variant: (rounds in which its first rank was shorter than
    base's, rounds both ran)}} for every variant but base. A first rank
    moves by more between processes than most changes move it; the rounds
    compared one by one (each ran the variants back to back) say more than
    medians apart."""
    firsts = {}
    for line in lines:
        result = line["result"]
        if "error" not in result and result.get("seconds"):
            firsts[(result["case"], line["variant"], line["round"])] = result["seconds"][0]
    out = {}
    for (case, variant, r), first in firsts.items():
        other = firsts.get((case, base, r))
        if variant == base or other is None:
            continue
        shorter, rounds = out.setdefault(case, {}).get(variant, (0, 0))
        out[case][variant] = (shorter + (first < other), rounds + 1)
    return out


def render_paired(pairs, base):
    return "\n".join(f"{case:10} {variant:12} first rank shorter than {base}'s in {shorter} "
                     f"of {rounds} rounds" for case, variants in pairs.items()
                     for variant, (shorter, rounds) in variants.items())


def render(summary):
    rows = []
    for case, variants in summary.items():
        for variant, (firsts, laters) in variants.items():
            text = (f"{case:10} {variant:12} first " + " / ".join(f"{x:.1f}" for x in firsts)
                    + f" (median {statistics.median(firsts):.1f})")
            if laters:
                text += "; later " + " / ".join(f"{x:.1f}" for x in laters)
            rows.append(text)
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp/gdu-patterns")
    ap.add_argument("--cases", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    try:
        variants = dict(parse_variant(v) for v in a.variant)
    except ValueError as e:
        ap.error(str(e))
    cases = [c for c in a.cases.split(",") if c]
    unknown = [c for c in cases if c not in lp.CASES]
    if unknown:
        ap.error(f"unknown cases {unknown}; load_patterns.py has {lp.CASES}")
    model = os.path.join(a.dir, "model")
    lp.make(model)
    for path in lp.shards(model):  # warm, as load_patterns.py does
        with open(path, "rb", buffering=0) as f:
            while f.read(64 << 20):
                pass
    os.makedirs(a.out, exist_ok=True)
    lines = []
    with open(os.path.join(a.out, "patterns_ab.jsonl"), "a") as log:
        for r in range(a.rounds):
            for case in cases:
                for name in order(variants, r):
                    p = subprocess.run(
                        [sys.executable, os.path.join(HERE, "load_patterns.py"), "--one", case,
                         "--loader", "gd", "--dir", a.dir],
                        capture_output=True, text=True, env=dict(os.environ, **variants[name]),
                        timeout=900)
                    result = next((json.loads(x) for x in reversed(p.stdout.splitlines())
                                   if x.startswith("{")),
                                  {"case": case, "error": (p.stderr or p.stdout)[-600:]})
                    line = {"variant": name, "round": r, "result": result}
                    lines.append(line)
                    log.write(json.dumps(line) + "\n")
                    log.flush()
            print(f"# round {r} done", flush=True)
    for line in lines:
        if "error" in line["result"]:
            print(f"# {line['variant']} {line['result']['case']}: "
                  f"{line['result']['error'][-200:]}")
    print(render(summarize(lines)))
    base = next(iter(variants))  # the first given
    print(render_paired(paired(lines, base), base))


if __name__ == "__main__":
    main()
