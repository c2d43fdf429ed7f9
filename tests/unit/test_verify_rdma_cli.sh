#!/usr/bin/env bash
# test_verify_rdma_cli.sh GDUNLOCK FAKE_IBVERBS: gdunlock verify --rdma on a
# machine without a verbs library, without an RDMA device (the fake
# libibverbs.so.1, tests/unit/fake_libibverbs.c), and with one: each refuses
# with exit 69, naming the cause and the fix, as text and as --json's error
# document. Exit 0 pass, 1 fail.
set -euo pipefail
gdunlock=$1 fake=$2
fail() { echo "FAIL: $*"; exit 1; }
check() { # NAME CODE TEXT, then the environment before the command
  local name=$1 code=$2 text=$3; shift 3
  local err rc=0
  err=$(env "$@" "$gdunlock" verify --rdma 2>&1 >/dev/null) || rc=$?
  [ "$rc" = 69 ] || fail "$name: exit $rc, want 69 ($err)"
  grep -qF -- "$text" <<<"$err" || fail "$name: no '$text' in: $err"
  grep -q '^  fix: ' <<<"$err" || fail "$name: no fix in: $err"
  local doc
  doc=$(env "$@" "$gdunlock" verify --rdma --json 2>/dev/null) || true
  python3 - "$code" "$doc" <<'PY' || fail "$name: --json: $doc"
import json, sys
d = json.loads(sys.argv[2])
assert d["exit_code"] == 69 and d["error"]["code"] == sys.argv[1] and d["error"]["fix"], d
PY
}
check "no verbs library" no-verbs-library "/nonexistent/libibverbs.so.1 cannot be loaded" \
  GDUNLOCK_IBVERBS=/nonexistent/libibverbs.so.1
check "no RDMA device" no-rdma-device "no RDMA device" GDUNLOCK_IBVERBS="$fake" FAKE_IBV_DEVICES=
# A verbs library in a folder longer than any name buffer is still loaded.
top=$(mktemp -d)
long="$top/a folder with a space $(printf 'p%.0s' $(seq 150))/$(printf 'q%.0s' $(seq 150))"
mkdir -p "$long"
ln -s "$fake" "$long/libibverbs.so.1"
check "a long path" no-rdma-device "no RDMA device" GDUNLOCK_IBVERBS="$long/libibverbs.so.1" FAKE_IBV_DEVICES=
rm -rf "$top"
check "a device" rdma-loopback-not-built "found 2 RDMA device(s)" \
  GDUNLOCK_IBVERBS="$fake" FAKE_IBV_DEVICES=mlx5_0,mlx5_1
# A PATH with --rdma, and neither: usage errors.
rc=0; "$gdunlock" verify --rdma /tmp/x 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "--rdma PATH: exit $rc, want 64"
rc=0; "$gdunlock" verify 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "no PATH: exit $rc, want 64"
echo "PASS: verify --rdma refuses without a verbs library or an RDMA device, naming the cause and the fix"
