#!/usr/bin/env bash
# The project's whole CPU test suite, as CI runs it:
#   1. release build + unit tests, each also under valgrind memcheck;
#   2. ASan + UBSan build + unit tests;
#   3. ThreadSanitizer build + the I/O engine's and loader's unit tests;
#   4. every libFuzzer target for a short run over its kept corpus (clang);
# first of all, that every C file is in the house style (scripts/format.sh).
# A failing stage does not stop the others: the last line counts every test
# of every stage, "N passed, N failed, N skipped" (each ctest test counts
# once, its counts read from ctest's JUnit file; the Python tests are ctest
# tests of step 1; a formatting check or a build that fails counts as one
# failed test), and the exit status is 1 when anything failed.
# Usage: scripts/test.sh [--quick]   (--quick: step 1 without valgrind only)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

step() { printf '\n=== %s\n' "$*"; }

passed=0 failed=0 skipped=0
failures=()
failed_step() { # failed_step WHAT: one failed test for a step that could not run its tests
  failed=$((failed + 1))
  failures+=("$1")
}
# ctest_counted DIR [ctest args...]: ctest over DIR, its results added to the
# counts. ctest's JUnit file says "notrun" both for a test that skipped
# itself (SKIP_RETURN_CODE, SKIP_REGULAR_EXPRESSION: a skip) and for one that
# could not be started (a failure, as ctest's own summary counts it).
ctest_counted() {
  local dir=$1 junit counts rc=0
  shift
  junit=$(realpath "$dir")/ctest-junit.xml
  rm -f "$junit"
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" --output-junit "$junit" "$@" || rc=$?
  if ! counts=$(python3 - "$junit" <<'PY'
import sys
import xml.etree.ElementTree as ET
counts = {"pass": 0, "fail": 0, "skip": 0}
failed = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    status = case.get("status")
    skip = case.find("skipped")
    if status == "run":
        kind = "pass"
    elif status == "disabled" or (status == "notrun" and skip is not None
                                  and skip.get("message", "").startswith("SKIP_")):
        kind = "skip"
    else:
        kind = "fail"
        failed.append(case.get("name"))
    counts[kind] += 1
print(counts["pass"], counts["fail"], counts["skip"], *failed)
PY
  ); then
    failed_step "ctest in $dir (exit $rc, no JUnit results)"
    return
  fi
  read -r -a counts <<<"$counts"
  passed=$((passed + counts[0]))
  failed=$((failed + counts[1]))
  skipped=$((skipped + counts[2]))
  local name
  for name in "${counts[@]:3}"; do failures+=("$name (${dir#"$PWD"/})"); done
  if [ "$rc" -ne 0 ] && [ "${counts[1]}" -eq 0 ]; then
    failed_step "ctest in $dir exited $rc with no test failed"
  fi
}
verdict() {
  step "verdict"
  [ ${#failures[@]} -eq 0 ] || printf 'failed: %s\n' "${failures[@]}"
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ] || exit 1
  exit 0
}
# build_tree DIR WHAT [cmake args...]: configures and builds DIR from the
# source tree $src_dir (default: this one); 1 when it could not.
build_tree() {
  local dir=$1 what=$2
  shift 2
  cmake -S "${src_dir:-.}" -B "$dir" "$@" >/dev/null &&
    cmake --build "$dir" -j"$jobs" ${target:+--target "$target"} ||
    { failed_step "$what build"; return 1; }
}

step "formatting"
if scripts/format.sh --check; then passed=$((passed + 1)); else failed_step "formatting"; fi

step "release build and unit tests"
build_tree build release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDUNLOCK_VALGRIND=$((1 - quick)) &&
  ctest_counted build
[ $quick = 1 ] && verdict

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
src_dir="$far/src" build_tree "$far/build" ASan -DCMAKE_BUILD_TYPE=Debug -DGDUNLOCK_SANITIZE=ON &&
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest_counted "$far/build" -L unit

# The engine's workers share its queue, staging and requests: a race there
# showed in 12 of 40 runs of test_io_gather under ThreadSanitizer and in no
# other test. test_io_fork starts threads in a child of a threaded process,
# which ThreadSanitizer does not support; test_safetensors_memory replaces
# malloc, which ThreadSanitizer intercepts.
step "ThreadSanitizer build and the engine's and loader's unit tests"
build_tree build-tsan TSan -DCMAKE_BUILD_TYPE=Debug -DGDUNLOCK_TSAN=ON &&
  TSAN_OPTIONS=halt_on_error=1 ctest_counted build-tsan -L unit \
    -R '^test_(io|safetensors)_' -E '^test_(io_fork|safetensors_memory)$'

step "fuzz targets, short runs over the kept corpora"
CC=clang target=fuzz_targets build_tree build-fuzz fuzz -DCMAKE_BUILD_TYPE=Debug -DGDUNLOCK_FUZZ=ON &&
  ctest_counted build-fuzz -L fuzz
verdict
