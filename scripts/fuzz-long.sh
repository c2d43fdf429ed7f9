#!/usr/bin/env bash
# Long fuzzing campaign: runs every libFuzzer target of build-fuzz for
# MINUTES (default 10) each, JOBS at a time (default nproc), on a copy of its
# kept corpus, and writes a summary table (target, minutes, executions,
# corpus size, crashes) to bench/results/fuzz-<date>.md. New crash inputs are
# copied into tests/fuzz/corpus/<target>/ so they become regression inputs.
set -uo pipefail
cd "$(dirname "$0")/.."
minutes=${MINUTES:-10}
jobs=${JOBS:-$(nproc)}
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DGDUNLOCK_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null || exit 1
work=$(mktemp -d)
targets=$(find build-fuzz/bin -maxdepth 1 -name 'fuzz_*' -type f -executable -printf '%f\n' | sort)
run_one() {
  local t=$1
  mkdir -p "$work/$t/corpus" "$work/$t/crashes"
  cp -r "tests/fuzz/corpus/$t/." "$work/$t/corpus/" 2>/dev/null
  "build-fuzz/bin/$t" -max_total_time=$((minutes * 60)) -print_final_stats=1 \
    -artifact_prefix="$work/$t/crashes/" "$work/$t/corpus" >"$work/$t/log" 2>&1
  echo $? >"$work/$t/rc"
}
export -f run_one
export work minutes
printf '%s\n' $targets | xargs -P "$jobs" -I{} bash -c 'run_one {}'
out=bench/results/fuzz-$(date -u +%Y-%m-%d).md
{
  echo "# Fuzzing campaign, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Machine: $(nproc) cores, $(uname -m), $(clang --version | head -1)."
  echo "Command: MINUTES=$minutes JOBS=$jobs scripts/fuzz-long.sh"
  echo
  echo "| target | minutes | executions | final corpus | crashes |"
  echo "| --- | --- | --- | --- | --- |"
  for t in $targets; do
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/$t/log" | grep -oE '[0-9]+$')
    corpus=$(ls "$work/$t/corpus" | wc -l)
    crashes=$(ls "$work/$t/crashes" | wc -l)
    echo "| $t | $minutes | ${execs:-?} | $corpus | $crashes |"
    if [ "$crashes" -gt 0 ]; then
      mkdir -p "tests/fuzz/corpus/$t"
      cp "$work/$t/crashes/"* "tests/fuzz/corpus/$t/"
    fi
  done
} >"$out"
cat "$out"
! grep -qE '\| [1-9][0-9]* \|$' "$out"
