"""The differential check of the shim on a datacenter GPU (issue 11, item 3).

The same program (shim_gpu_buffers) ran twice with the shim preloaded:
natively (libcuda makes its own ThirdPartyP2P object and registrations, the
shim only watches) and in strict test mode (libcuda's object freed, every
registration RM holds is the shim's: the GeForce state). Each run wrote the
shim's account of what RM holds while all buffers lived (SHIM_GPU_LEDGER) and
its buffer addresses (PTR lines). The registrations must be the same:

  - per GPU one ThirdPartyP2P object with exactly one VA space, the same
    handle in both runs, the one registered with UVM;
  - every registration libcuda holds natively is held in strict mode with the
    same size and offset at the same place relative to its buffer;
  - what strict mode holds beyond that is the VMM buffer (libcuda never
    registers VMM memory) and libcuda's internal device memory.

Usage: shim_differential.py NATIVE_LEDGER NATIVE_OUT STRICT_LEDGER STRICT_OUT
Prints one PASS/FAIL line."""
import json
import sys


def load(ledger, out):
    with open(ledger) as f:
        led = json.load(f)
    ptrs = {}
    with open(out) as f:
        for line in f:
            p = line.split()
            if p and p[0] == "PTR":
                ptrs[p[2]] = (int(p[3], 16), int(p[4]))
    return led, ptrs


def objects(led):
    return [o for o in led.get("thirdpartyp2p", []) if o["registrations"] or o["va_spaces"]]


def containing(led, addr):
    for o in led.get("thirdpartyp2p", []):
        for r in o["registrations"]:
            if r["address"] <= addr < r["address"] + r["size"]:
                return o, r
    return None, None


def main():
    nled, nptr = load(sys.argv[1], sys.argv[2])
    sled, sptr = load(sys.argv[3], sys.argv[4])
    problems = []
    nobj = [o for o in objects(nled) if o["owner"] == "libcuda"]
    sobj = [o for o in objects(sled) if o["owner"] == "shim"]
    if not nobj or not sobj:
        print("FAIL shim-differential: objects native %d (libcuda's), strict %d (the shim's)" % (len(nobj), len(sobj)))
        return
    nvas = sorted((o["rm_device"], v["handle"], v["uvm"]) for o in nobj for v in o["va_spaces"])
    svas = sorted((o["rm_device"], v["handle"], v["uvm"]) for o in sobj for v in o["va_spaces"])
    for o in sobj:
        if len(o["va_spaces"]) != 1:
            problems.append("strict object 0x%x has %d VA spaces" % (o["handle"], len(o["va_spaces"])))
    used = {o["rm_device"] for o in sobj}
    if [v for v in nvas if v[0] in used] != svas or not all(v[2] for v in svas):
        problems.append("VA spaces native %s, strict %s" % (nvas, svas))
    n_native = sum(len(o["registrations"]) for o in nobj)
    matched = 0
    for name, (ptr, size) in sorted(nptr.items()):
        if not name.startswith("cuMemAlloc"):
            continue
        _, nr = containing(nled, ptr)
        if name not in sptr:
            problems.append("%s missing in strict run" % name)
            continue
        _, sr = containing(sled, sptr[name][0])
        if nr is None:
            problems.append("%s not registered natively" % name)
            continue
        matched += 1
        want = (nr["address"] - ptr, nr["size"], nr["offset"])
        got = None if sr is None else (sr["address"] - sptr[name][0], sr["size"], sr["offset"])
        if want != got:
            problems.append("%s: native (rel. address, size, offset) %s, strict %s" % (name, want, got))
    vmm = sptr.get("VMM-64MiB")
    _, vr = containing(sled, vmm[0]) if vmm else (None, None)
    _, nvr = containing(nled, nptr["VMM-64MiB"][0]) if "VMM-64MiB" in nptr else (None, None)
    if vr is None:
        problems.append("the VMM buffer is not registered in strict mode")
    if nvr is not None:
        problems.append("the VMM buffer is registered natively (libcuda never did so before)")
    n_strict = sum(len(o["registrations"]) for o in sobj)
    extra = n_strict - matched - (1 if vr else 0)
    line = ("native: %d registrations by libcuda (%d of them the program's cuMemAlloc buffers), VA spaces %s; "
            "strict: %d by the shim = the same %d (same size, offset and place in each buffer) + the VMM buffer + "
            "%d of libcuda's internal allocations (which libcuda itself never registers); VA spaces %s"
            % (n_native, matched, nvas, n_strict, matched, extra, svas))
    if n_native != matched:
        problems.append("%d native registrations are not the program's buffers" % (n_native - matched))
    print(("FAIL" if problems else "PASS") + " shim-differential: " + line + ("; " + "; ".join(problems) if problems else ""))


if __name__ == "__main__":
    main()
