#!/usr/bin/env bash
# check_shim_preload.sh SHIM: what libgdunlock.so costs a process it is
# preloaded into that makes no GPU call: nothing on stderr, whatever
# GDUNLOCK_LOG says (an invalid value in a pipeline once printed a warning
# from every process), and no library of its own beyond libc (the report is
# written without libjansson, which was once loaded into every process).
# Exit 0 pass, 1 fail.
set -euo pipefail
. "$(dirname "$0")/preload_link.sh"
preload_link "$1"
shim=$preload
work=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock-preload-XXXXXX")
trap 'rm -rf "$work" "$preload_dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for level in banana "" debug; do
  LD_PRELOAD=$shim GDUNLOCK_LOG=$level sh -c "true | true | cat /proc/self/maps >'$work/maps'" \
    2>"$work/err" || fail "a pipeline under the shim (GDUNLOCK_LOG='$level') exited $?"
  [ ! -s "$work/err" ] || fail "GDUNLOCK_LOG='$level': the shim printed in a process without GPU calls: $(head -3 "$work/err")"
  grep -q "$(basename "$shim")" "$work/maps" || fail "the shim was not preloaded (GDUNLOCK_LOG='$level')"
  ! grep -q libjansson "$work/maps" || fail "libjansson is loaded into a preloaded process"
done
# GDUNLOCK takes every boolean word kvikio takes (any case); any other value
# leaves the shim on, silently. gdunlock_test_totals answers -2 where the
# shim is off in the process.
if command -v python3 >/dev/null; then
  for v in 0 off OFF No false "" 1 on True banana; do
    want=0
    case $v in 0 | off | OFF | No | false) want=-2 ;; esac
    got=$(LD_PRELOAD=$shim GDUNLOCK=$v python3 -c 'import ctypes
print(ctypes.CDLL(None).gdunlock_test_totals((ctypes.c_ulonglong * 9)()))' 2>&1)
    [ "$got" = "$want" ] || fail "GDUNLOCK='$v': the shim's state answers '$got', not $want"
  done
fi
needed=$(readelf -d "$shim" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -vE '^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libasan|libubsan)\.so|^ld-linux' || true)
[ -z "$needed" ] || fail "the shim needs a library beyond the C and compiler runtimes: $needed"
echo "PASS: a preloaded process without GPU calls: silent for GDUNLOCK_LOG=banana, empty, debug; GDUNLOCK off for every boolean word; no libjansson; NEEDED only the C runtime"
