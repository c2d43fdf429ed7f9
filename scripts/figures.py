#!/usr/bin/env python3
"""Draws the figures of README.md and bench/results/README.md,
docs/figures/NAME.svg, from the measured results stored in bench/results/
(their JSON, never a number typed here).
Run it by hand when a result lands, then commit the SVGs:

    python3 scripts/figures.py              # every figure
    python3 scripts/figures.py loaders p2p  # the ones named
    python3 scripts/figures.py --list       # names and sources

Needs matplotlib (Debian: apt-get install python3-matplotlib). The output
is reproducible (fixed element ids, no date), so a re-run changes a file
only where its data changed.

A new figure is one function under @figure(NAME, SOURCE...): it receives the
matplotlib Figure and the parsed JSON of each SOURCE (a path under
bench/results/; .jsonl gives a list of records) and draws, usually with
bars() or matrix(). The sources are named under the figure, so every figure
says where its numbers come from.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
OUT = os.path.join(ROOT, "docs", "figures")

FIGURES = {}  # name -> (draw, sources, size)

# Colours: gdunlock's rows, other loaders or paths, and the ceiling.
OURS, OTHERS, CEILING = "#1f77b4", "#9e9e9e", "#d62728"


def figure(name, *sources, size=(8, 4)):
    """Registers draw(fig, *documents) as docs/figures/NAME.svg."""
    def register(draw):
        FIGURES[name] = (draw, sources, size)
        return draw
    return register


def load(source):
    with open(os.path.join(RESULTS, source)) as f:
        if source.endswith(".jsonl"):
            return [json.loads(line) for line in f if line.strip()]
        return json.load(f)


def bars(ax, rows, unit="GB/s", ceiling=None, ceiling_label="ceiling", title=None):
    """Horizontal bars, one per (label, value, colour[, (low, high)]) row,
    top to bottom, each labelled with its value; a ceiling as a dashed
    line. A row whose value is None is drawn as text (a path that did not
    run, with its reason)."""
    labels = [r[0] for r in rows]
    ys = list(range(len(rows)))[::-1]
    top = max([r[1] for r in rows if r[1] is not None] + [ceiling or 0])
    for y, row in zip(ys, rows):
        label, value, colour = row[:3]
        if value is None:
            ax.text(top * 0.01, y, colour, va="center", fontsize=8, color="#555555")
            continue
        err, end = None, value
        if len(row) > 3 and row[3] is not None:
            low, high = row[3]
            err, end = [[value - low], [high - value]], max(value, high)
        ax.barh(y, value, color=colour, xerr=err, capsize=2, height=0.6)
        ax.text(end + top * 0.01, y, f"{value:.2f}", va="center", fontsize=8)
    if ceiling is not None:
        ax.axvline(ceiling, color=CEILING, linestyle="--", linewidth=1)
        ax.text(ceiling, len(rows) - 0.5, f" {ceiling_label} {ceiling:.2f}", color=CEILING,
                fontsize=8, va="center", ha="left")
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlim(0, top * 1.3)
    ax.set_ylim(-0.6, len(rows))
    ax.set_xlabel(unit, fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=9, loc="left")


def matrix(ax, values, title, unit="GB/s", norm=None, labels=None):
    """A GPU x GPU matrix (rows = source, columns = destination) as a
    heat map with each cell's value written in it."""
    n = len(values)
    labels = labels or [str(i) for i in range(n)]
    image = ax.imshow(values, cmap="Blues", norm=norm)
    for i in range(n):
        for j in range(n):
            v = values[i][j]
            dark = image.norm(v) > 0.6
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=9,
                    color="white" if dark else "black")
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("destination GPU", fontsize=8)
    ax.set_ylabel("source GPU", fontsize=8)
    ax.set_title(f"{title} ({unit})", fontsize=9)


def sources_note(fig, sources):
    """The files a figure was drawn from, one a line, under it; returns the
    height they take (a fraction of the figure)."""
    lines = [f"data: bench/results/{s}" for s in sources]
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, color="#555555", ha="left", va="bottom")
    return 0.01 + len(lines) * 0.11 / fig.get_figheight()


def shorten(text, width=80):
    """TEXT cut in the middle to WIDTH characters, keeping its end (where a
    reason's status name is)."""
    if len(text) <= width:
        return text
    keep = (width - 3) // 2
    return f"{text[:keep]} ... {text[-keep:]}"


# ---------------------------------------------------------------------------
# The figures.

LOADER_NAMES = {
    "gdunlock-load": ("gdunlock load_safetensors", OURS),
    "gdunlock-cli": ("gdunlock load (CLI)", OURS),
    "gdunlock-safe-open": ("gdunlock safe_open, every key", OURS),
    "gdunlock-iterator": ("gdunlock weights_iterator", OURS),
    "safetensors": ("safetensors.torch.load_file", OTHERS),
    "fastsafetensors": ("fastsafetensors", OTHERS),
}


def loader_rows(doc):
    """One bar per loader of a tests/gpu/load.sh compare document: the
    median GB/s of its first loads in fresh processes."""
    rows = []
    for key, gbps in doc["median_gbps"].items():
        label, colour = LOADER_NAMES.get(key, (key, OTHERS))
        if key == "fastsafetensors" and doc.get("fastsafetensors"):
            label += f" {doc['fastsafetensors']['version']}"
        rows.append((label, gbps, colour))
    return rows


def load_ceiling(doc):
    """min(host, h2d) of the bench run beside the loads: the machine's ceiling."""
    return min(p["gbps"] for p in doc["bench"]["paths"] if p["path"] in ("host", "h2d"))


@figure("loaders", "2026-12-01-h200-batch6-load-compare.json", size=(8, 5.2))
def _loaders(fig, doc):
    calls = sorted(doc)
    axes = fig.subplots(len(calls), 1, sharex=True)
    for ax, call in zip(axes, calls):
        d = doc[call]
        bars(ax, loader_rows(d), ceiling=load_ceiling(d), ceiling_label="min(host, h2d)",
             title=f"{call.replace('call', 'call ')}, {d['machine']['date']}")
    first = doc[calls[0]]
    fig.suptitle(f"Loaders side by side: the first load of a {first['runs'][0]['bytes'] / 2**30:.2f}"
                 f" GiB checkpoint in a fresh process, page cache warm,\none "
                 f"{first['bench']['machine']['gpu']} (median GB/s)", fontsize=10, x=0.01, ha="left")


def bench_rows(doc):
    """One bar per path of a `gdunlock bench --json` document, with its
    slowest-fastest range; a path that could not run, as its reason."""
    rows = []
    for p in doc["paths"]:
        if not p["ran"]:
            rows.append((p["path"], None, f"did not run: {shorten(p['note'])}"))
            continue
        colour = OURS if p["path"] == "engine" else OTHERS
        rows.append((p["path"], p["gbps"], colour, (p["gbps_min"], p["gbps_max"])))
    return rows


def bench_title(doc, what):
    params = doc["params"]
    return (f"{what}: {params['total_bytes'] / 2**30:.0f} GiB, {params['workers']} workers, "
            f"{doc['machine']['cpus']} CPUs")


BENCH_RUNS = ("2026-11-30-h200x2-io-batch3-json/io-bench-warm.json",
              "2026-11-30-h200x2-io-batch3-json/io-bench-cold.json",
              "2026-11-30-h200x2-io-batch3-json/io-bench-write.json")


@figure("bench-paths", *BENCH_RUNS, size=(8, 7))
def _bench_paths(fig, warm, cold, write):
    axes = fig.subplots(3, 1, gridspec_kw={"height_ratios": [7, 3, 3]})
    for ax, doc, what in zip(axes, (warm, cold, write),
                             ("read, page cache warm", "read, cold (O_DIRECT, virtio disk)",
                              "write")):
        bars(ax, bench_rows(doc), ceiling=doc["ceiling_gbps"], title=bench_title(doc, what))
    fig.suptitle(f"gdunlock bench: every path against the machine's ceiling "
                 f"({warm['machine']['gpu']}, median of {warm['params']['rounds']} rounds, "
                 f"slowest-fastest)", fontsize=10, x=0.01, ha="left")


@figure("p2p", "2026-11-30-h200x2-p2p-batch4.json", size=(7, 6.4))
def _p2p(fig, doc):
    from matplotlib.colors import LogNorm

    bw = doc["measured"]["bandwidth_gbps"]
    panels = [(bw[d][p]["median"], f"{d}, peer access {'on' if p == 'p2p_enabled' else 'off'}")
              for d in ("unidirectional", "bidirectional") for p in ("p2p_disabled", "p2p_enabled")]
    values = [v for m, _ in panels for row in m for v in row]
    norm = LogNorm(vmin=min(values), vmax=max(values))
    labels = [f"{g['ordinal']}" for g in doc["gpus"]]
    for ax, (m, title) in zip(fig.subplots(2, 2).flat, panels):
        matrix(ax, m, title, norm=norm, labels=labels)
    names = ", ".join(sorted({g["name"] for g in doc["gpus"]}))
    fig.suptitle(f"gdunlock p2p: copy-engine bandwidth between {len(doc['gpus'])} x {names}, "
                 f"{doc['date']}\nmedian of {doc['iters']} samples, "
                 f"{doc['size_bytes'] >> 20} MiB copies; the diagonal is a copy within one GPU",
                 fontsize=9, x=0.01, ha="left")


# ---------------------------------------------------------------------------


def draw(name):
    import matplotlib
    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({"svg.hashsalt": "gdunlock", "svg.fonttype": "none",
                                "font.family": "sans-serif"})
    fn, sources, size = FIGURES[name]
    fig = plt.figure(figsize=size)
    fn(fig, *[load(s) for s in sources])
    fig.tight_layout(rect=(0, sources_note(fig, sources), 1, 0.95))
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"{name}.svg")
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="figures to draw (default: all)")
    parser.add_argument("--list", action="store_true", help="list the figures and their sources")
    args = parser.parse_args()
    if args.list:
        for name, (_, sources, _) in FIGURES.items():
            print(f"{name}: {', '.join(sources)}")
        return 0
    unknown = [n for n in args.names if n not in FIGURES]
    if unknown:
        print(f"figures.py: no figure {', '.join(unknown)}; there are {', '.join(FIGURES)}",
              file=sys.stderr)
        return 64
    for name in args.names or FIGURES:
        print(os.path.relpath(draw(name), ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
