#!/usr/bin/env bash
# gdunlock verify installed under a prefix whose path has a space and a ':'
# (where ld.so splits LD_PRELOAD): its child runs with the shim through a
# link in verify's temporary folder, removed with it; where the link cannot
# be made either, verify runs without the shim and says why; a shim that does
# not load in the child is reported inactive. Over the fake libcuda and
# libcufile of test_verify_cli.sh (cuFile refuses the file: COMPAT, exit 2).
# Usage: verify_preload.sh path/to/gdunlock path/to/libgdunlock.so VERIFY_FAKES
set -uo pipefail
bin=$1
shim=$2
fakes=$3
# shellcheck source=preload_prefix.sh
. "$(dirname "$0")/preload_prefix.sh"
export LD_LIBRARY_PATH=$fakes GDUNLOCK_LIBCUFILE=$fakes/libfakecufile.so FAKE_CUFILE=5027
export GDUNLOCK_NVFS_STATS=$work/absent-stats GDUNLOCK_IO_WORKERS=2
unset GDUNLOCK_REPORT LD_PRELOAD GDUNLOCK

pre="$work/pre fix:1"
install_prefix "$pre" "$shim"
mkdir -p "$work/tmp"
# json FILE EXPR: EXPR (Python, over the document d) holds.
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null; }
ids='[r["id"] for r in d["reasons"]]'

TMPDIR=$work/tmp "$pre/bin/gdunlock" verify "$work/a.bin" --size 1MiB --json >"$work/out" 2>"$work/err"
code=$?
if [ $code -ne 2 ] || grep -q 'cannot be preloaded' "$work/err"; then
  bad "prefix with ' ' and ':': exit $code: $(head -3 "$work/err")"
elif ! json "$work/out" 'd["shim"]["active"] and "shim-inactive" not in '"$ids"; then
  bad "prefix with ' ' and ':': the shim is not active: $(head -c 400 "$work/out")"
else
  ok "prefix with ' ' and ':': the shim loaded in verify's child, no ld.so error"
fi
[ -z "$(ls -A "$work/tmp")" ] || bad "left behind in TMPDIR: $(ls -A "$work/tmp")"

mkdir -p "$work/t mp"
TMPDIR="$work/t mp" "$pre/bin/gdunlock" verify "$work/b.bin" --size 1MiB --json >"$work/out" 2>"$work/err"
code=$?
if [ $code -eq 2 ] && ! grep -q 'cannot be preloaded' "$work/err" &&
  json "$work/out" 'not d["shim"]["active"] and "set TMPDIR" in d["shim"]["why_inactive"] and "shim-inactive" in '"$ids"; then
  ok "no folder for a link either: run without the shim, saying why"
else
  bad "TMPDIR with a space too: exit $code: $(head -c 400 "$work/out") $(head -3 "$work/err")"
fi
[ -z "$(ls -A "$work/t mp")" ] || bad "left behind in TMPDIR: $(ls -A "$work/t mp")"

broken="$work/broken"
install_prefix "$broken" /dev/null
TMPDIR=$work/tmp "$broken/bin/gdunlock" verify "$work/c.bin" --size 1MiB --json >"$work/out" 2>"$work/err"
code=$?
if [ $code -eq 2 ] && json "$work/out" 'not d["shim"]["active"] and "did not load" in d["shim"]["why_inactive"]'; then
  ok "a shim that does not load: reported inactive"
else
  bad "a shim that does not load: exit $code: $(head -c 400 "$work/out")"
fi
[ -z "$(ls -A "$work/tmp")" ] || bad "left behind in TMPDIR: $(ls -A "$work/tmp")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
