#!/usr/bin/env bash
# gdunlock run ended by a signal: SIGTERM, SIGINT and SIGHUP are passed on
# to CMD, which is waited for; the run's folder is removed; the exit is
# 128+N; nothing is left running. Also: gdunlock killed outright takes CMD
# with it, and --report to a FIFO nobody reads fails instead of hanging.
# Usage: run_signals.sh path/to/gdunlock
set -uo pipefail
set -m # background jobs keep SIGINT (without job control a script's ignore it)
bin=$1
work=$(mktemp -d)
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
cleanup() {
  [ -s "$work/cmd.pid" ] && kill -KILL "$(cat "$work/cmd.pid")" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# start: runs CMD (a shell that records its pid, then waits in sleep) under
# gdunlock run in the background; sets $run and $cmd.
start() {
  rm -f "$work/cmd.pid"
  "$bin" run -- sh -c 'echo $$ >"$1"; exec sleep 60' sh "$work/cmd.pid" >"$work/out" 2>"$work/err" &
  run=$!
  for _ in $(seq 100); do [ -s "$work/cmd.pid" ] && break; sleep 0.05; done
  cmd=$(cat "$work/cmd.pid" 2>/dev/null)
}

for sig in TERM INT HUP; do
  start
  if [ -z "$cmd" ]; then bad "SIG$sig: CMD did not start: $(cat "$work/err")"; kill -KILL $run; continue; fi
  kill -s $sig $run
  code=124
  for _ in $(seq 100); do kill -0 $run 2>/dev/null || break; sleep 0.05; done
  if kill -0 $run 2>/dev/null; then
    kill -KILL $run
  fi
  wait $run
  code=$?
  want=$((128 + $(kill -l $sig)))
  left=$(ls -A "$TMPDIR")
  if kill -0 "$cmd" 2>/dev/null; then
    bad "SIG$sig: CMD (pid $cmd) still runs after gdunlock ended (exit $code)"
    kill -KILL "$cmd"
  elif [ $code -ne $want ]; then
    bad "SIG$sig: exit $code, expected $want: $(cat "$work/err")"
  elif [ -n "$left" ]; then
    bad "SIG$sig: left behind in TMPDIR: $left"
  else
    ok "SIG$sig: passed on, CMD ended, exit $code, nothing left: $(head -c 100 "$work/err" | tr '\n' ' ')"
  fi
  rm -rf "${TMPDIR:?}"/*
done

# gdunlock killed outright: CMD is not left running.
start
kill -KILL $run
wait $run 2>/dev/null
for _ in $(seq 100); do kill -0 "$cmd" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$cmd" 2>/dev/null; then
  bad "SIGKILL: CMD (pid $cmd) left running"
  kill -KILL "$cmd"
else
  ok "SIGKILL: CMD ended with gdunlock"
fi
rm -rf "${TMPDIR:?}"/*

# SIGTERM after CMD ended, while the report blocks on a stdout pipe nobody
# reads (this shell holds it open both ways): the run ends, cleaning up.
mkfifo "$work/stdout.fifo"
exec 3<>"$work/stdout.fifo"
"$bin" run --json -- sh -c 'python3 -c "import json; print(json.dumps([\"x\" * 1000] * 300))" \
  >"${GDUNLOCK_REPORT%/*}/report-1.json"; : >"$1"' sh "$work/cmd.done" >"$work/stdout.fifo" \
  2>"$work/err" &
run=$!
# Signalled while CMD still runs, the signal goes to CMD: wait until CMD is
# done (a signal after that ends gdunlock wherever it is) and, where the
# kernel shows it, gdunlock blocks writing to the pipe, however loaded the
# machine.
for _ in $(seq 400); do
  [ -e "$work/cmd.done" ] && [ "$(cat /proc/$run/wchan 2>/dev/null)" = pipe_write ] && break
  sleep 0.05
done
kill -TERM $run
for _ in $(seq 100); do kill -0 $run 2>/dev/null || break; sleep 0.05; done
if kill -0 $run 2>/dev/null; then
  bad "SIGTERM while stdout blocks: gdunlock run still runs"
  kill -KILL $run
  wait $run 2>/dev/null
else
  wait $run
  code=$?
  left=$(ls -A "$TMPDIR")
  if [ -n "$left" ]; then
    bad "SIGTERM while stdout blocks: left behind in TMPDIR: $left"
  else
    ok "SIGTERM while stdout blocks: ended (exit $code), nothing left: $(head -c 100 "$work/err" | tr '\n' ' ')"
  fi
fi
exec 3<&-
rm -rf "${TMPDIR:?}"/*

# --report to a FIFO with no reader: an error, not a hang.
mkfifo "$work/report.fifo"
timeout 30 "$bin" run --report "$work/report.fifo" -- true >"$work/out" 2>"$work/err"
code=$?
if [ $code -eq 74 ] && grep -q "cannot write the report" "$work/err"; then
  ok "--report FIFO without reader: exit 74: $(head -c 120 "$work/err" | tr '\n' ' ')"
else
  bad "--report FIFO without reader: exit $code: $(cat "$work/err")"
fi
rm -f "$work/cmd.pid"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
