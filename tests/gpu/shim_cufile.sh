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
exit 0
