#!/usr/bin/env python3
"""Judges one `gdunlock p2p --json` run (and PyTorch's numbers from
p2p_torch.py, and `nvidia-smi topo -m` when given): prints PASS/FAIL/SKIP
lines for tests/gpu/run.sh, the SM rows and route checks included.
Usage: p2p_check.py OURS.json [TORCH.json] [TOPO.txt]"""
import json
import sys


def out(kind, name, text):
    print(f"{kind} {name}: {text}")


def cell(m, i, j):
    v = m["median"][i][j]
    return v if v is not None else float("nan")


def route_line(r, name):
    """PASS for a route whose pattern came back, SKIP where the pair has no
    peer access that way (with the reason), FAIL for a fault or wrong data."""
    st = r[name]
    where = f"{r['src']}->{r['dst']}"
    if st["state"] == "ok":
        return "PASS", f"{name} {where}: ok"
    text = f"{name} {where}: {st['state']}"
    if st.get("cause"):
        text += f" [{st['cause']}] {st.get('reason', '')}"
    if st.get("detail"):
        text += f" ({st['detail']})"
    return ("SKIP" if st["state"] == "no_peer" else "FAIL"), text


def sm_checks(ours, m, n):
    """The SM rows (the diagonal on one GPU, every pair on more) and each
    route's pattern check."""
    sm = m.get("sm")
    if sm is None:
        out("SKIP", "p2p-sm", "SM part not run (--no-sm)")
        return
    if sm.get("error"):
        out("FAIL", "p2p-sm-error", sm["error"])
    bw = sm["bandwidth_gbps"]
    lat = sm["latency_us"]["chase"]
    for i in range(n):
        for j in range(n):
            w, r, c = cell(bw["write"], i, j), cell(bw["read"], i, j), cell(lat, i, j)
            ok = w > 0 and r > 0 and c > 0
            name = "p2p-sm-diagonal" if i == j and n == 1 else f"p2p-sm-{i}to{j}"
            ce = cell(m["bandwidth_gbps"]["unidirectional"]["p2p_enabled"], i, j)
            out("PASS" if ok else "FAIL", name,
                f"SM write {w:.1f} GB/s, SM read {r:.1f} GB/s (copy engine {ce:.1f} GB/s), "
                f"pointer chase {c:.3f} us per load ({sm['chase_nodes']} nodes, "
                f"{sm['chase_hops']} loads per sample)")
    for r in m["routes"]:
        kinds = [route_line(r, k) for k in ("copy_engine", "sm_write", "sm_read")]
        worst = "FAIL" if any(k == "FAIL" for k, _ in kinds) else \
                "SKIP" if any(k == "SKIP" for k, _ in kinds) else "PASS"
        out(worst, f"p2p-routes-{r['src']}to{r['dst']}",
            "; ".join(t for _, t in kinds) + f" ({sm['check_bytes']} bytes per SM check)")


def main():
    ours = json.load(open(sys.argv[1]))
    torch = json.load(open(sys.argv[2])) if len(sys.argv) > 2 and sys.argv[2] != "-" else None
    topo = open(sys.argv[3]).read() if len(sys.argv) > 3 else ""
    n = len(ours["gpus"])
    m = ours.get("measured")
    if m is None:
        out("FAIL", "p2p-measured", f"no measurements: {ours.get('bench_error')}")
        return
    ver = m["verification"]
    out("PASS" if ver["ok"] and ver["buffers_checked"] > 0 else "FAIL", "p2p-data-verified",
        f"{ver['buffers_checked']} buffers compared with their source pattern, {ver['buffers_corrupt']} wrong")
    diag = cell(m["bandwidth_gbps"]["unidirectional"]["p2p_enabled"], 0, 0)
    out("PASS" if diag > 0 else "FAIL", "p2p-diagonal", f"copy within GPU 0: {diag:.1f} GB/s")
    sm_checks(ours, m, n)
    if n < 2:
        out("SKIP", "p2p-pairs", "one GPU: no pair (needs nvidia-h200-x2)")
        return

    # Capability: the RM's caps, CUDA's answer and the verdict agree.
    if ours.get("rm_caps_error"):
        out("FAIL", "p2p-rm-caps", ours["rm_caps_error"])
    for p in ours["pairs"]:
        s, d, rm, v = p["src"], p["dst"], p["rm"], p["verdict"]
        name = f"{s}->{d}"
        if rm is not None:
            out("PASS", f"p2p-rm-caps-{name}",
                f"link={rm['link']} caps={','.join(rm['caps'])} read={rm['status']['read']} "
                f"write={rm['status']['write']} nvlink={rm['status']['nvlink']}")
        agree = (rm is None) or ((rm["link"] != "none") == bool(p["cuda"]["can_access_peer"]))
        out("PASS" if agree else "FAIL", f"p2p-rm-vs-cuda-{name}",
            f"CUDA can_access_peer={p['cuda']['can_access_peer']} rank={p['cuda']['performance_rank']} "
            f"atomics={p['cuda']['native_atomics']}; RM link={rm['link'] if rm else '?'}; "
            f"verdict p2p={v['p2p']} link={v['link']} cause={v['cause']} {v['reason']}")
    if topo:
        nv = any(tok.startswith("NV") and tok[2:].isdigit() for tok in topo.split())
        rm01 = next((p["rm"] for p in ours["pairs"] if p["src"] == 0 and p["dst"] == 1), None)
        if rm01 is not None:
            ok = (rm01["link"] == "nvlink") == nv
            out("PASS" if ok else "FAIL", "p2p-link-vs-nvidia-smi",
                f"nvidia-smi topo shows NVLink: {nv}; RM link 0->1: {rm01['link']}")

    bw = m["bandwidth_gbps"]
    lat = m["latency_us"]
    en01 = cell(bw["unidirectional"]["p2p_enabled"], 0, 1)
    dis01 = cell(bw["unidirectional"]["p2p_disabled"], 0, 1)
    bi01 = cell(bw["bidirectional"]["p2p_enabled"], 0, 1)
    le = cell(lat["cpu_timed"]["p2p_enabled"], 0, 1)
    ld = cell(lat["cpu_timed"]["p2p_disabled"], 0, 1)
    lge = cell(lat["gpu_timed"]["p2p_enabled"], 0, 1)
    can = m["peer_access"]["enabled"][0][1]
    text = (f"0->1 enabled {en01:.1f} GB/s (bidirectional {bi01:.1f}) vs disabled/staged {dis01:.1f} GB/s; "
            f"latency copy+sync {le:.2f} us enabled vs {ld:.2f} us disabled, GPU-timed {lge:.2f} us "
            f"(reference: ~395, 776, 37.7 GB/s; 6.7 vs 14.7 us)")
    out("PASS" if (not can) or en01 > dis01 else "FAIL", "p2p-enabled-vs-disabled", text)
    if m["peer_access"].get("enable_error"):
        out("FAIL", "p2p-enable", m["peer_access"]["enable_error"])

    if torch is None:
        out("SKIP", "p2p-vs-torch", "no PyTorch measurement")
        return
    for (s, d, key) in ((0, 1, "copy_0to1_gbps"), (1, 0, "copy_1to0_gbps")):
        o = cell(bw["unidirectional"]["p2p_enabled"], s, d)
        t = torch[key]["median"]
        rel = abs(o - t) / t if t > 0 else float("inf")
        out("PASS" if rel <= 0.05 else "FAIL", f"p2p-vs-torch-{s}to{d}",
            f"ours {o:.1f} GB/s vs PyTorch copy_ {t:.1f} GB/s ({rel * 100:.1f} % apart; "
            f"PyTorch .to() {torch['to_gbps']['median']:.1f} GB/s; torch {torch['torch']})")
    out("PASS" if torch.get("data_ok") else "FAIL", "p2p-torch-data", f"PyTorch copies equal: {torch.get('data_ok')}")


if __name__ == "__main__":
    main()
