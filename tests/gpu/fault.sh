#!/usr/bin/env bash
# Shim fault injection on the real driver (issue 8): every RM call the shim
# itself makes fails in turn (GDUNLOCK_FAULT=n fails the n-th), in the strict
# GeForce reproduction (GDUNLOCK_TEST_DROP_NATIVE=strict: the shim does all
# NV503C work itself). Each run must exit 0 with GPU data identical to the run
# without the shim, and the shim must say what failed (a log line, a failure
# in its report). Prints one PASS/FAIL line per injected call and a summary.
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
O="$OUT/fault"
mkdir -p "$O"
SHIM=$(readlink -f "$BUILD/lib/libgdunlock.so" 2>/dev/null)
PROG="$BUILD/bin/shim_gpu_buffers"
if [ -z "$SHIM" ] || [ ! -x "$PROG" ]; then
  echo "FAIL fault-built: libgdunlock.so or shim_gpu_buffers missing in $BUILD"
  exit 0
fi
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  echo "SKIP fault: no NVIDIA GPU here"
  exit 0
fi
py() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
run_shim() { # NAME [ENV...]: the buffers program on GPU 0 under the shim in strict mode
  local name=$1
  shift
  rm -f "$O/$name"-report-*.json
  env LD_PRELOAD="$SHIM" GDUNLOCK_TEST_DROP_NATIVE=strict GDUNLOCK_LOG=info \
    GDUNLOCK_REPORT="$O/$name-report-%p.json" "$@" timeout 120 "$PROG" 0 >"$O/$name.out" 2>"$O/$name.err"
}

env -u LD_PRELOAD timeout 120 "$PROG" 0 >"$O/plain.out" 2>"$O/plain.err"
run_shim clean
rep=$(ls "$O"/clean-report-*.json 2>/dev/null | head -1)
calls=$([ -n "$rep" ] && py "$rep" 'd["rm_calls"]')
if [ -z "$calls" ] || [ "$calls" -lt 1 ]; then
  echo "FAIL fault-count: the run without faults reported no RM calls of the shim's (${rep:-no report})"
  exit 0
fi
echo "INFO fault: the shim makes $calls RM calls of its own in this program; failing each in turn"
ok=0
bad=0
for ((n = 1; n <= calls; n++)); do
  run_shim "n$n" GDUNLOCK_FAULT=$n
  rc=$?
  rep=$(ls "$O"/n$n-report-*.json 2>/dev/null | head -1)
  failures=$([ -n "$rep" ] && py "$rep" 'sum(g["failures"] for g in d["gpus"])')
  said=$(grep '^gdunlock:' "$O/n$n.err" | grep -v 'fault injected' | grep -iE 'fail|refus|error|NV_ERR|not ' | head -1)
  if [ $rc -eq 0 ] && diff <(grep ^SUM "$O/plain.out") <(grep ^SUM "$O/n$n.out") >/dev/null \
     && grep -q "fault injected into the shim's RM call #$n\b" "$O/n$n.err" \
     && { [ "${failures:-0}" -ge 1 ] || [ -n "$said" ]; }; then
    ok=$((ok + 1))
    echo "PASS fault-$n: exit 0, GPU data unchanged, report failures ${failures:-?}; shim said: ${said:-$(grep '^gdunlock:' "$O/n$n.err" | grep -v 'fault injected' | head -1)}"
  else
    bad=$((bad + 1))
    echo "FAIL fault-$n: exit $rc, data $(diff -q <(grep ^SUM "$O/plain.out") <(grep ^SUM "$O/n$n.out") >/dev/null && echo same || echo DIFFERENT), report failures ${failures:-?}, log: $(grep '^gdunlock:' "$O/n$n.err" | head -3 | tr '\n' ' ')"
  fi
done
echo "INFO fault: $ok of $calls injected failures left the program's results unchanged"
