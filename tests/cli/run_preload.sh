#!/usr/bin/env bash
# gdunlock run installed under a prefix whose path has a space and a ':'
# (where ld.so splits LD_PRELOAD): the shim still loads in CMD and in what CMD
# starts; where its link cannot be made either, run refuses before starting
# CMD; a shim that does not load in CMD makes run exit 69, saying so.
# Usage: run_preload.sh path/to/gdunlock path/to/libgdunlock.so
set -uo pipefail
bin=$1
shim=$2
# shellcheck source=preload_prefix.sh
. "$(dirname "$0")/preload_prefix.sh"

pre="$work/pre fix:1"
install_prefix "$pre" "$shim"
mkdir -p "$work/tmp"
export TMPDIR=$work/tmp

TMPDIR=$work/tmp "$pre/bin/gdunlock" run -- sh -c 'grep -q libgdunlock.so /proc/$$/maps && sh -c "grep -q libgdunlock.so /proc/\$\$/maps"' \
  >"$work/out" 2>"$work/err"
code=$?
if [ $code -ne 0 ]; then
  bad "prefix with ' ' and ':': exit $code: $(head -3 "$work/err")"
elif grep -q 'cannot be preloaded' "$work/err"; then
  bad "prefix with ' ' and ':': ld.so complained: $(head -3 "$work/err")"
else
  ok "prefix with ' ' and ':': the shim loaded in CMD and its child, no ld.so error"
fi
[ -z "$(ls -A "$work/tmp")" ] || bad "left behind in TMPDIR: $(ls -A "$work/tmp")"

mkdir -p "$work/t mp"
TMPDIR="$work/t mp" "$pre/bin/gdunlock" run -- sh -c 'echo ran >"$1"' sh "$work/ran" >"$work/out" 2>"$work/err"
code=$?
if [ $code -eq 69 ] && grep -q "space or ':'" "$work/err" && grep -q "fix: set TMPDIR" "$work/err" && [ ! -e "$work/ran" ]; then
  ok "no folder for a link either: exit 69 before CMD ran: $(head -1 "$work/err")"
else
  bad "TMPDIR with a space too: exit $code, CMD ran: $([ -e "$work/ran" ] && echo yes || echo no): $(head -3 "$work/err")"
fi

broken="$work/broken"
install_prefix "$broken" /dev/null
"$broken/bin/gdunlock" run -- true >"$work/out" 2>"$work/err"
code=$?
if [ $code -eq 69 ] && grep -q "did not load in 'true'" "$work/err"; then
  ok "a shim that does not load: exit 69: $(grep 'did not load' "$work/err" | head -1)"
else
  bad "a shim that does not load: exit $code: $(tail -3 "$work/err")"
fi
"$broken/bin/gdunlock" run --json -- true >"$work/out" 2>"$work/err"
code=$?
if [ $code -eq 69 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["exit_code"] == 69 and d["error"]["code"] == "shim_not_loaded"' "$work/out"; then
  ok "--json: one error document, code shim_not_loaded"
else
  bad "--json with a shim that does not load: exit $code: $(head -c 300 "$work/out")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
