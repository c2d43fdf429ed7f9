#!/usr/bin/env bash
# check_shim_seccomp.sh SHIM RUNNER INTERPOSE_TEST: the shim must never be
# what kills a process. Under a seccomp filter that kills on
# process_vm_readv (RUNNER: shim_seccomp_run), a preloaded /bin/echo and
# sh run as without the shim, and the shim's reader of ioctl blocks still
# tells readable memory from unreadable (test_shim_interpose's cases, run
# under the same filter). Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/preload_link.sh"
preload_link "$1" || exit 1
trap 'rm -rf "$preload_dir"' EXIT
shim=$preload
runner=$2
interpose=$3
fail() { echo "FAIL: $*"; exit 1; }

"$runner" --selftest 2>/dev/null
rc=$?
[ $rc -eq 159 ] || fail "the filter does not kill on process_vm_readv (selftest exit $rc, want 159 = SIGSYS)"
out=$("$runner" "$shim" /bin/echo hello 2>&1)
rc=$?
[ $rc -eq 0 ] && [ "$out" = hello ] || fail "/bin/echo with the shim under the filter: exit $rc, output '$out'"
out=$("$runner" "$shim" sh -c 'echo $((6 * 7)) | cat' 2>&1)
rc=$?
[ $rc -eq 0 ] && [ "$out" = 42 ] || fail "sh with the shim under the filter: exit $rc, output '$out'"
out=$("$runner" "$shim" "$interpose" 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "test_shim_interpose under the filter: exit $rc: $(echo "$out" | tail -5)"
echo "PASS: under a filter that kills on process_vm_readv: echo, sh and the interposer's tests run"
