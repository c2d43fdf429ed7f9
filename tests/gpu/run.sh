#!/usr/bin/env bash
# GPU test runner for the accelerator machine. Runs every tests/gpu/<name>.sh
# (or only those named as arguments) from a build folder carried there
# (BUILD, default ./build). Each check script prints lines
#   PASS <check>: <evidence>   or   FAIL <check>: <evidence>   or   SKIP <check>: <why>
# This runner echoes them and prints the final count.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GDU_ROOT=$(cd "$here/../.." && pwd)
export BUILD=${BUILD:-$GDU_ROOT/build}
export OUT=${OUT:-/tmp/gdu-gpu-out}
mkdir -p "$OUT"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$here"/*.sh; do
    b=$(basename "$f" .sh)
    [ "$b" = run ] || names+=("$b")
  done
fi
log="$OUT/gpu-tests.log"
: >"$log"
for n in "${names[@]}"; do
  echo "=== $n" | tee -a "$log"
  timeout "${GDU_CHECK_TIMEOUT:-900}" bash "$here/$n.sh" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || echo "FAIL $n: check script exited $rc" | tee -a "$log"
done
pass=$(grep -c '^PASS ' "$log")
fail=$(grep -c '^FAIL ' "$log")
skip=$(grep -c '^SKIP ' "$log")
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
