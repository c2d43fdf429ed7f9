#!/usr/bin/env bash
# cuFile (compat mode) through the shim in the GeForce state of the H200
# (strict test mode), with the kernel lookup's verdict on every buffer given
# to cuFile (issue 11): gdunlock verify, natively and in strict test mode.
# Writes udev's entry for the root disk for the run (tests/gpu/udev_root.sh).
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
here=$(cd "$(dirname "$0")" && pwd)
O="$OUT/shim-cufile"
mkdir -p "$O"
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "SKIP $1: $2"; }
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  skip shim-cufile "no NVIDIA GPU here"
  exit 0
fi
. "$here/udev_root.sh"
dir=/root
udev_root_setup "$dir" || { fail shim-cufile-udev "cannot write udev's entry for $dir"; exit 0; }
trap udev_root_remove EXIT
for mode in native strict; do
  f="$dir/gdunlock-cufile-$mode.bin"
  rm -f "$f"
  envs=()
  [ $mode = strict ] && envs=(GDUNLOCK_TEST_DROP_NATIVE=strict)
  env "${envs[@]}" timeout 300 "$BUILD/bin/gdunlock" verify "$f" --size 16M --json >"$O/verify-$mode.json" 2>"$O/verify-$mode.err"
  rc=$?
  rm -f "$f"
  line=$(python3 - "$O/verify-$mode.json" "$rc" "$mode" <<'PY'
import json, sys
path, rc, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    d = json.load(open(path))
except Exception as e:
    print("FAIL no JSON (%s), exit %d" % (e, rc)); sys.exit()
k = d.get("shim", {}).get("kernel_lookup") or {}
bufs = d.get("buffers", [])
ok = all(b.get("integrity_ok") for b in bufs if not b.get("skipped"))
hreg = d.get("cufile", {}).get("handle_register", {})
desc = ("verdict %s (exit %d), handle %s, buffers identical %s, shim mode %s, kernel lookup %s/%s found%s"
        % (d.get("verdict"), rc, hreg.get("name", hreg.get("code")), ok, d.get("shim", {}).get("mode"),
           k.get("found"), k.get("cufile_buffers"), ": " + k["first_refusal"] if k.get("first_refusal") else ""))
good = d.get("verdict") == "COMPAT" and ok and k.get("cufile_buffers", 0) >= 1
if mode == "strict":
    good = good and k.get("found") == k.get("cufile_buffers") and d.get("shim", {}).get("mode") == "unlocked"
print(("PASS " if good else "FAIL ") + desc)
PY
)
  echo "${line%% *} shim-cufile-verify-$mode: ${line#* }"
done

# gdunlock load through cuFile's ring of registered buffers (a simulated
# 256 MiB BAR1) under the strict shim: every buffer of the ring found by the
# lookup, within the budget the lookup's model gives.
ring="$dir/gdunlock-ring.safetensors"
python3 -c "import torch; from safetensors.torch import save_file; save_file({'w%d' % i: torch.arange(8 << 20, dtype=torch.float32) + i for i in range(16)}, '$ring')" 2>"$O/ring-make.err"
if [ -f "$ring" ]; then
  GDUNLOCK_IO_BACKEND=cufile GDUNLOCK_TEST_BAR1=256M timeout 300 "$BUILD/bin/gdunlock" run --report "$O/ring-run.json" -- \
    env GDUNLOCK_TEST_DROP_NATIVE=strict "$BUILD/bin/gdunlock" load --gpu 0 --verify --json "$ring" \
    >"$O/ring-load.json" 2>"$O/ring-run.err"
  rc=$?
  rm -f "$ring"
  python3 - "$O/ring-run.json" "$rc" <<'PY'
import json, sys
rc = int(sys.argv[2])
try:
    run = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL shim-cufile-load-ring: exit %d, no run report (%s)" % (rc, e)); sys.exit()
procs = run.get("processes", [])
cf = [p.get("cufile_buffers", {}) for p in procs]
reg = sum(c.get("registered", 0) for c in cf)
found = sum(c.get("found", 0) for c in cf)
modes = sorted({g["mode"] for p in procs for g in p["gpus"]})
why = [b["why"] for c in cf for b in c.get("buffers", []) if b.get("kernel_lookup") != "found"][:1]
ok = rc == 0 and reg >= 2 and found == reg and "unlocked" in modes
print(("PASS" if ok else "FAIL") + " shim-cufile-load-ring: gdunlock load (cuFile ring, GDUNLOCK_TEST_BAR1=256M) under the strict shim: exit %d, modes %s, %d cuFile buffers registered, %d found by the lookup%s" % (rc, modes, reg, found, ": " + why[0] if why else ""))
# RM's own BAR1 figures, asked by the shim when it wrote the report.
gpus = [g for p in procs for g in p["gpus"] if g.get("pci")]
rm = [(g.get("rm_bar1_bytes", 0), g.get("rm_bar1_available_bytes", 0), g.get("rm_bar1_why")) for g in gpus]
ok = bool(rm) and all(t > 0 and 0 < a <= t for t, a, _ in rm)
print(("PASS" if ok else "FAIL") + " shim-rm-bar1: the shim's report carries RM's BAR1 (total, unused, why): %s" % rm)
PY
  # Without the simulated BAR1 the ring asks RM for the unused BAR1.
  python3 -c "import torch; from safetensors.torch import save_file; save_file({'w': torch.arange(1 << 20, dtype=torch.float32)}, '$ring')" 2>>"$O/ring-make.err"
  GDUNLOCK_IO_BACKEND=cufile timeout 300 "$BUILD/bin/gdunlock" load --gpu 0 --json "$ring" \
    >"$O/ring-rm-load.json" 2>"$O/ring-rm-load.err"
  rc=$?
  rm -f "$ring"
  python3 - "$O/ring-rm-load.json" "$rc" <<'PY'
import json, sys
rc = int(sys.argv[2])
try:
    reason = json.load(open(sys.argv[1])).get("reason") or ""
except Exception as e:
    reason = "no JSON (%s)" % e
ok = rc == 0 and "unused by any process (RM)" in reason
print(("PASS" if ok else "FAIL") + " load-ring-rm-bar1: the cuFile ring sized with RM's unused BAR1: exit %d, reason: %s" % (rc, reason))
PY
else
  echo "SKIP shim-cufile-load-ring: could not make the checkpoint: $(tail -1 "$O/ring-make.err")"
fi
exit 0
