#!/bin/sh
# Runs gdunlock bench on a scratch file of its own, removed afterwards, so that
# parallel tests and concurrent suite runs in one build folder never share it.
# usage: io_bench_fake.sh GDUNLOCK DIR BENCH-ARGS...
gdu=$1
dir=$2
shift 2
f=$(mktemp "$dir/bench-fake-XXXXXX") || exit 70
"$gdu" bench -f "$f" "$@"
rc=$?
rm -f "$f"
exit $rc
