#!/usr/bin/env bash
# The project's whole CPU test suite, as CI runs it:
#   1. release build + unit tests, each also under valgrind memcheck;
#   2. ASan + UBSan build + unit tests;
#   3. ThreadSanitizer build + the I/O engine's and loader's unit tests;
#   4. every libFuzzer target for a short run over its kept corpus (clang);
# first of all, that every C file is in the house style (scripts/format.sh).
# Usage: scripts/test.sh [--quick]   (--quick: step 1 without valgrind only)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

step() { printf '\n=== %s\n' "$*"; }

step "formatting"
scripts/format.sh --check

step "release build and unit tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDUNLOCK_VALGRIND=$((1 - quick)) >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
[ $quick = 1 ] && exit 0

# Users and CI clone into folders we do not choose: this stage builds and
# runs from a copy of the tree in a folder of 200 characters with a space, so
# a reason that loses its words to a long path fails here.
step "AddressSanitizer + UndefinedBehaviorSanitizer build and unit tests, from a long folder"
far="$PWD/build-asan/a folder with a space $(printf 'p%.0s' $(seq 1 200))"
far=${far:0:$((${#PWD} + 200))}
rm -rf build-asan && mkdir -p "$far/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do { [ -e "$f" ] || [ -L "$f" ]; } && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$far/src"
else
  tar --exclude='./build*' -cf - . | tar -xf - -C "$far/src"
fi
cmake -S "$far/src" -B "$far/build" -DCMAKE_BUILD_TYPE=Debug -DGDUNLOCK_SANITIZE=ON >/dev/null
cmake --build "$far/build" -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$far/build" --output-on-failure -j"$jobs" -L unit

# The engine's workers share its queue, staging and requests: a race there
# showed in 12 of 40 runs of test_io_gather under ThreadSanitizer and in no
# other test. test_io_fork starts threads in a child of a threaded process,
# which ThreadSanitizer does not support; test_safetensors_memory replaces
# malloc, which ThreadSanitizer intercepts.
step "ThreadSanitizer build and the engine's and loader's unit tests"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DGDUNLOCK_TSAN=ON >/dev/null
cmake --build build-tsan -j"$jobs"
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure -j"$jobs" -L unit \
  -R '^test_(io|safetensors)_' -E '^test_(io_fork|safetensors_memory)$'

step "fuzz targets, short runs over the kept corpora"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DGDUNLOCK_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_targets
ctest --test-dir build-fuzz --output-on-failure -j"$jobs" -L fuzz
