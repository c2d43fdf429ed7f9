#!/usr/bin/env bash
# A FIFO where bench and verify take a file, given so or put in its place
# after their checks (the fake libcudas do it at cuInit: FAKE_CUDA_FIFO_AT):
# neither command hangs; each exits with its documented code (bench 66,
# verify 64), names what is there, and leaves it where it was.
# Usage: fifo_swap.sh path/to/gdunlock FAKE_CUDA_DIR VERIFY_FAKES
set -uo pipefail
bin=$1
fake_cuda=$2
verify_fakes=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
unset LD_PRELOAD GDUNLOCK_REPORT

# expect NAME CODE FILE ENV... -- ARGS...: gdunlock ARGS with ENV exits CODE
# within 60 s, says "FILE is a FIFO, not a regular file", and FILE is still a FIFO.
expect() {
  local name=$1 want=$2 file=$3 envs=()
  shift 3
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 60 "$bin" "$@" >"$work/out" 2>"$work/err" </dev/null
  local rc=$?
  if [ $rc -ne "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want$([ $rc -eq 124 ] && echo ' (hung)'): $(head -3 "$work/err")"
    fail=$((fail + 1))
  elif ! grep -qF "$file is a FIFO, not a regular file" "$work/err"; then
    echo "FAIL $name: the message does not name the FIFO: $(head -3 "$work/err")"
    fail=$((fail + 1))
  elif [ ! -p "$file" ]; then
    echo "FAIL $name: the FIFO was removed or replaced"
    fail=$((fail + 1))
  else
    echo "ok   $name: exit $rc: $(head -1 "$work/err")"
    pass=$((pass + 1))
  fi
}

mkfifo "$work/given.fifo"
expect "bench -f FIFO" 66 "$work/given.fifo" X=1 -- bench -f "$work/given.fifo" -s 1M
expect "verify FIFO" 64 "$work/given.fifo" X=1 -- verify "$work/given.fifo" --no-shim --size 1MiB

cuda=(LD_LIBRARY_PATH="$fake_cuda")
for how in "" "--rw write" "--cold"; do
  env "${cuda[@]}" "$bin" bench -f "$work/bench.dat" --create -s 1M --paths host >/dev/null 2>&1 ||
    echo "bench --create failed"
  # shellcheck disable=SC2086 # $how: options or none
  expect "bench $how, a FIFO put in place after the check" 66 "$work/bench.dat" \
    "${cuda[@]}" FAKE_CUDA_FIFO_AT="$work/bench.dat" -- bench -f "$work/bench.dat" -s 1M $how
  rm -f "$work/bench.dat"
done

vfakes=(LD_LIBRARY_PATH="$verify_fakes" GDUNLOCK_LIBCUFILE="$verify_fakes/libfakecufile.so"
  FAKE_CUFILE=5027 GDUNLOCK_NVFS_STATS="$work/absent-stats")
expect "verify, a FIFO put in place after the check" 64 "$work/verify.bin" \
  "${vfakes[@]}" FAKE_CUDA_FIFO_AT="$work/verify.bin" -- verify "$work/verify.bin" --no-shim --size 1MiB

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
