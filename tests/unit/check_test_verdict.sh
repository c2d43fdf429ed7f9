#!/usr/bin/env bash
# check_test_verdict.sh SOURCE: scripts/test.sh runs every stage whatever
# failed before, ends on one line "N passed, N failed, N skipped" over all of
# them, and exits 1 when anything failed, 0 when nothing did. It runs a copy
# of test.sh in a scratch tree (a path with spaces) with stand-ins for
# scripts/format.sh, cmake and ctest on PATH: each stand-in ctest writes the
# JUnit file real ctest writes (cmake 3.25's layout: status run, fail,
# notrun with <skipped message="SKIP_RETURN_CODE=77"/> or "Unable to find
# executable", disabled) for the results named in FAKE_CTEST_<stage>, the
# stage (release, asan, tsan, fuzz) known by its build folder's name.
set -euo pipefail
src=$(realpath "$1")
top=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock verdict-XXXXXX")
trap 'rm -rf "$top"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$top/tree/scripts" "$top/bin"
cp "$src/scripts/test.sh" "$top/tree/scripts/"
cat >"$top/tree/scripts/format.sh" <<'EOF'
#!/bin/sh
[ "$FAKE_FORMAT" = ok ]
EOF
cat >"$top/bin/stage" <<'EOF'
#!/bin/sh
# stage DIR: the stage a build folder belongs to
case $1 in
  *build-asan*) echo asan ;;
  *build-tsan*) echo tsan ;;
  *build-fuzz*) echo fuzz ;;
  *) echo release ;;
esac
EOF
cat >"$top/bin/cmake" <<'EOF'
#!/usr/bin/env bash
# --build DIR fails when DIR's stage is in FAKE_BROKEN_BUILDS; configuring always works.
if [ "$1" = --build ] && [[ " $FAKE_BROKEN_BUILDS " == *" $(stage "$2") "* ]]; then exit 2; fi
exit 0
EOF
cat >"$top/bin/ctest" <<'EOF'
#!/usr/bin/env bash
junit=/dev/null # without --output-junit, only the exit status
while [ $# -gt 0 ]; do
  case $1 in
    --test-dir) dir=$2; shift ;;
    --output-junit) junit=$2; shift ;;
  esac
  shift
done
var=FAKE_CTEST_$(stage "$dir")
rc=0
[ "$junit" = /dev/null ] || mkdir -p "$(dirname "$junit")"
{
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<testsuite name="x" tests="0">'
  i=0
  for result in ${!var}; do
    i=$((i + 1))
    case $result in
      pass) echo "<testcase name=\"t$i\" status=\"run\"><system-out/></testcase>" ;;
      fail) echo "<testcase name=\"t$i\" status=\"fail\"><failure message=\"\"/></testcase>"; rc=8 ;;
      skip) echo "<testcase name=\"t$i\" status=\"notrun\"><skipped message=\"SKIP_RETURN_CODE=77\"/></testcase>" ;;
      missing) echo "<testcase name=\"t$i\" status=\"notrun\"><skipped message=\"Unable to find executable\"/></testcase>"; rc=8 ;;
      disabled) echo "<testcase name=\"t$i\" status=\"disabled\"><system-out>Disabled</system-out></testcase>" ;;
    esac
  done
  echo '</testsuite>'
} >"$junit"
exit $rc
EOF
chmod +x "$top/tree/scripts/"*.sh "$top/bin/"*

# run_case WANT_EXIT WANT_LINE [VAR=VALUE...]: test.sh's exit status and last
# line; prints its output.
run_case() {
  local want_rc=$1 want_line=$2 rc=0 out last
  shift 2
  out=$(cd "$top" && env PATH="$top/bin:$PATH" FAKE_FORMAT=ok FAKE_BROKEN_BUILDS= "$@" \
    "$top/tree/scripts/test.sh" 2>&1) || rc=$?
  last=$(tail -n 1 <<<"$out")
  [ "$last" = "$want_line" ] && [ $rc = "$want_rc" ] ||
    fail "with $*: exit $rc and last line '$last', not $want_rc and '$want_line'; the output: $out"
  echo "$out"
}

all_pass=(FAKE_CTEST_release="pass pass pass skip" FAKE_CTEST_asan="pass pass"
          FAKE_CTEST_tsan="pass" FAKE_CTEST_fuzz="pass disabled")
run_case 0 "8 passed, 0 failed, 2 skipped" "${all_pass[@]}" >/dev/null
# A failure in every kind of place: the formatting, a test, a test that could
# not start, a build; the stages after each still run and count.
out=$(run_case 1 "5 passed, 4 failed, 1 skipped" FAKE_FORMAT=bad \
  FAKE_CTEST_release="pass fail skip missing" FAKE_CTEST_asan="pass pass" \
  FAKE_BROKEN_BUILDS=tsan FAKE_CTEST_fuzz="pass pass")
for name in "formatting" "t2 (build)" "t4 (build)" "TSan build"; do
  grep -qxF "failed: $name" <<<"$out" || fail "the failures listed do not name '$name': $out"
done
out=$(cd "$top" && env PATH="$top/bin:$PATH" FAKE_FORMAT=ok FAKE_CTEST_release="pass fail" \
  FAKE_CTEST_asan="pass" "$top/tree/scripts/test.sh" --quick 2>&1) && fail "--quick with a failed test exited 0"
[ "$(tail -n 1 <<<"$out")" = "2 passed, 1 failed, 0 skipped" ] || fail "--quick ended on '$(tail -n 1 <<<"$out")'"
! grep -q "AddressSanitizer" <<<"$out" || fail "--quick ran the sanitizer stage"
echo "PASS: test.sh runs every stage, ends on 'N passed, N failed, N skipped' and exits 1 on any failure"
