#!/usr/bin/env bash
# Feeds every gdunlock command nonsense (missing files, directories,
# /dev/zero, an empty file, huge and negative numbers, a GPU that does not
# exist, unknown flags) and checks each answer: a documented exit code, a
# message naming the problem when it fails, no crash (signal) and no
# hang (timeout). Doctor reports its verdict on stdout, so a message on either
# stream counts. Usage: nonsense.sh path/to/gdunlock
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/empty"
printf 'not a safetensors file' >"$work/junk"
documented=" 0 1 2 10 11 12 64 66 69 70 74 "
pass=0
fail=0

check() { # expected-codes... -- args...
  local want=() args=()
  while [ "$1" != "--" ]; do want+=("$1"); shift; done
  shift
  args=("$@")
  timeout 60 "$bin" "${args[@]}" >"$work/out" 2>"$work/err" </dev/null
  local rc=$?
  local why=""
  if [ $rc -eq 124 ]; then
    why="hung (timeout)"
  elif [ $rc -ge 128 ]; then
    why="killed by signal $((rc - 128))"
  elif [[ "$documented" != *" $rc "* ]]; then
    why="undocumented exit code $rc"
  elif [ ${#want[@]} -gt 0 ] && [[ " ${want[*]} " != *" $rc "* ]]; then
    why="exit $rc, expected one of: ${want[*]}"
  elif [ $rc -ne 0 ] && [ ! -s "$work/err" ] && [ ! -s "$work/out" ]; then
    why="exit $rc with no message"
  elif grep -qiE 'AddressSanitizer|runtime error:|LeakSanitizer' "$work/err"; then
    why="sanitizer report"
  fi
  if [ -n "$why" ]; then
    fail=$((fail + 1))
    echo "FAIL gdunlock ${args[*]}: $why"
    sed 's/^/    /' "$work/err" | head -5
  else
    pass=$((pass + 1))
    echo "ok   gdunlock ${args[*]} -> $rc: $(head -c 120 "$work/err" | tr '\n' ' ')"
  fi
}

check 64 --
check 64 -- no-such-command
check 0 -- --help
for cmd in doctor topo verify bench p2p load run; do
  check 0 -- "$cmd" --help
  check 64 -- "$cmd" --no-such-flag
done
check 64 -- run
check 66 -- run -- /no/such/program
check 0 10 11 12 69 -- doctor
check 0 10 11 12 66 69 -- doctor /no/such/path
check 0 10 11 12 69 -- doctor /dev/zero
check 64 -- doctor --sysroot
check 0 10 11 12 66 69 -- doctor --sysroot /no/such/dir
check 0 10 11 12 66 69 -- doctor --sysroot "$work/empty"
check 0 10 11 12 69 -- doctor --sysroot "$work"
check 0 69 -- topo
check 0 66 69 -- topo --sysroot /no/such/dir
check 64 -- verify
check 66 69 -- verify /no/such/dir/file
check 64 66 69 -- verify "$work"
check 64 66 69 -- verify /dev/zero
check 64 -- verify "$work/new" --size -1
check 64 -- verify "$work/new" --size 99999999999999999999
check 64 -- verify "$work/new" --size banana
check 64 69 -- verify "$work/new" --gpu 99
check 64 -- verify "$work/new" --gpu -3
check 64 66 -- bench
check 66 69 -- bench -f /no/such/file
check 64 66 69 -- bench -f /dev/zero -s 1M
check 64 66 69 -- bench -f "$work/empty"
check 64 66 69 -- bench -D "$work/empty"
check 64 -- bench -f "$work/x" -s -5
check 64 -- bench -f "$work/x" -s 99999999999999999999
check 64 -- bench -f "$work/x" -w 0
check 64 -- bench -f "$work/x" -w 100000000
check 64 66 69 -- bench -f "$work/x" -d 99
check 0 1 69 -- p2p
check 64 -- p2p --gpus banana
check 64 69 -- p2p --gpus 0,99
check 64 -- p2p --size -1
check 64 -- p2p --iters 0
check 64 -- load
check 66 -- load /no/such/model.safetensors
check 64 66 -- load "$work"
check 64 66 -- load /dev/zero --to host
check 64 66 -- load "$work/empty" --to host
check 64 66 -- load "$work/junk" --to host
check 64 66 69 -- load "$work/junk" --gpu 99
check 64 -- load "$work/junk" --gpu -1
check 64 -- load "$work/junk" --gpu 0,0,banana

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
