#!/usr/bin/env bash
# test_verify_rdma_cli.sh GDUNLOCK FAKE_IBVERBS FAKES: gdunlock verify --rdma
# with the fake libibverbs.so.1 (tests/unit/fake_libibverbs.c), whose queue
# pair copies between registered ranges, and the fake libcuda in FAKES, whose
# device memory is host memory. The loopback passes on InfiniBand and RoCE,
# says FAIL naming the offset of a byte the adapter changed, and refuses with
# exit 69, the cause and the fix, without a verbs library, an RDMA device, an
# active port or the GPU, and at each step that fails, naming the call.
# Exit 0 pass, 1 fail.
set -euo pipefail
gdunlock=$1 fake=$2 fakes=$3
export LD_LIBRARY_PATH=$fakes
fail() { echo "FAIL: $*"; exit 1; }
extra=() # more arguments of verify --rdma
refuses() { # NAME CODE TEXT, then the environment before the command
  local name=$1 code=$2 text=$3; shift 3
  local err rc=0
  err=$(env "$@" "$gdunlock" verify --rdma --size 64KiB ${extra[@]+"${extra[@]}"} 2>&1 >/dev/null) || rc=$?
  [ "$rc" = 69 ] || fail "$name: exit $rc, want 69 ($err)"
  grep -qF -- "$text" <<<"$err" || fail "$name: no '$text' in: $err"
  grep -q '^  fix: ' <<<"$err" || fail "$name: no fix in: $err"
  local doc
  doc=$(env "$@" "$gdunlock" verify --rdma --size 64KiB ${extra[@]+"${extra[@]}"} --json 2>/dev/null) || true
  python3 - "$code" "$doc" <<'PY' || fail "$name: --json: $doc"
import json, sys
d = json.loads(sys.argv[2])
assert d["exit_code"] == 69 and d["error"]["code"] == sys.argv[1] and d["error"]["fix"], d
PY
}
refuses "no verbs library" no-verbs-library "/nonexistent/libibverbs.so.1 cannot be loaded" \
  GDUNLOCK_IBVERBS=/nonexistent/libibverbs.so.1
refuses "no RDMA device" no-rdma-device "no RDMA device" GDUNLOCK_IBVERBS="$fake" FAKE_IBV_DEVICES=
# A verbs library in a folder longer than any name buffer is still loaded.
top=$(mktemp -d)
long="$top/a folder with a space $(printf 'p%.0s' $(seq 150))/$(printf 'q%.0s' $(seq 150))"
mkdir -p "$long"
ln -s "$fake" "$long/libibverbs.so.1"
refuses "a long path" no-rdma-device "no RDMA device" GDUNLOCK_IBVERBS="$long/libibverbs.so.1" FAKE_IBV_DEVICES=
rm -rf "$top"
export GDUNLOCK_IBVERBS=$fake FAKE_IBV_DEVICES=mlx5_0,mlx5_1
refuses "no active port" no-active-port "no RDMA device has an active port (mlx5_1 port 1: state DOWN)" \
  FAKE_IBV_PORT=down
extra=(--gpu 3)
refuses "no such GPU" no-gpu "GPU 3 does not exist (1 visible)"
# One work request moves the buffer: more than the port's largest message is refused.
extra=(--size 2GiB)
refuses "a message too large" rdma-step-failed \
  "--size 2147483648 exceeds mlx5_0 port 1's largest message (1073741824 bytes)"
extra=()
# Each step that fails is named, with its errno where the call gives one.
refuses "open_device" no-active-port "mlx5_1: ibv_open_device: No such device" FAKE_IBV_FAIL=open_device
refuses "alloc_pd" rdma-step-failed "ibv_alloc_pd failed: Cannot allocate memory" FAKE_IBV_FAIL=alloc_pd
refuses "reg_mr" rdma-step-failed "ibv_reg_mr (GPU buffer) of 65536 bytes failed: Bad address (errno 14)" \
  FAKE_IBV_FAIL=reg_mr
# Its fix follows what the GPU reports: a GeForce (attribute 116 reads 0)
# needs the shim's answers; a GPU that reports GPUDirect RDMA, a peer-memory client.
refuses "reg_mr, GeForce" rdma-step-failed "GPU_DIRECT_RDMA_SUPPORTED = 0, as a GeForce does): run it under 'gdunlock run --rdma" \
  FAKE_IBV_FAIL=reg_mr
refuses "reg_mr, data center" rdma-step-failed "needs a peer-memory client: load nvidia-peermem" \
  FAKE_IBV_FAIL=reg_mr FAKE_CUDA_RDMA=1
refuses "create_cq" rdma-step-failed "ibv_create_cq failed" FAKE_IBV_FAIL=create_cq
refuses "create_qp" rdma-step-failed "ibv_create_qp (RC) failed" FAKE_IBV_FAIL=create_qp
refuses "modify_qp" rdma-step-failed "ibv_modify_qp (INIT) on mlx5_0 port 1 failed: Invalid argument (errno 22)" \
  FAKE_IBV_FAIL=modify_qp
refuses "post_send" rdma-step-failed "ibv_post_send of the RDMA write into GPU memory failed" \
  FAKE_IBV_FAIL=post_send
refuses "completion" rdma-step-failed \
  "the RDMA write into GPU memory completed with remote access error (status 10" FAKE_IBV_FAIL=completion

# The loopback: every byte back, on InfiniBand (LID) and RoCE (GID index 0).
route="peer memory: ibv_reg_mr" # the route the next passes() must show
passes() { # NAME SHOWN, then the environment before the command
  local name=$1 shown=$2; shift 2
  local out rc=0
  out=$(env "$@" "$gdunlock" verify --rdma --size 1MiB ${extra[@]+"${extra[@]}"} 2>&1) || rc=$?
  [ "$rc" = 0 ] || fail "$name: exit $rc, want 0 ($out)"
  for want in "RDMA loopback: PASS" "$shown" "route    $route" "all 1048576 equal"; do
    grep -qF -- "$want" <<<"$out" || fail "$name: no '$want' in: $out"
  done
  local doc
  doc=$(env "$@" "$gdunlock" verify --rdma --size 1MiB ${extra[@]+"${extra[@]}"} --json) ||
    fail "$name: --json exit $?"
  python3 - "$doc" "$route" "${FAKE_WANT_DMABUF:-0}" <<'PY' || fail "$name: --json: $doc"
import json, sys
d = json.loads(sys.argv[1])
assert d["schema"] == "gdunlock-verify-rdma/1" and d["exit_code"] == 0, d
assert d["verdict"] == "PASS" and d["size"] == d["bytes_compared"] == 1048576, d
assert d["device"] == "mlx5_0" and d["port"] == 1 and d["route"].startswith(sys.argv[2]), d
assert d["devices"] == ["mlx5_0", "mlx5_1"], d
assert d["gpu"]["gpu_direct_rdma_supported"] is False, d
assert d["gpu"]["dma_buf_supported"] is (sys.argv[3] == "1"), d
PY
}
passes "InfiniBand" "adapter  mlx5_0 port 1, InfiniBand, LID 7"
passes "RoCE" "adapter  mlx5_0 port 1, Ethernet, GID index 0" FAKE_IBV_LINK=ethernet

# Route (b): where the GPU exports dma-bufs (attribute 124), NCCL's choice is
# the DMA-BUF route: the dma-buf of the buffer's pages, registered at the
# buffer's address (the fake adapter takes only the dma-buf of that range;
# the fake libcuda's buffers start 256 bytes into a page).
route="dma-buf: ibv_reg_dmabuf_mr"
FAKE_WANT_DMABUF=1 passes "DMA-BUF route" "adapter  mlx5_0 port 1, InfiniBand" FAKE_CUDA_DMABUF=1
route="peer memory: ibv_reg_mr"
extra=(--route peer-memory)
FAKE_WANT_DMABUF=1 passes "peer memory asked for" "adapter  mlx5_0 port 1" FAKE_CUDA_DMABUF=1
extra=(--route dma-buf)
refuses "dma-buf, GeForce libcuda" rdma-step-failed \
  "cuMemGetHandleForAddressRange (a dma-buf of the GPU buffer's 65536 bytes of pages) failed: CUDA_ERROR_NOT_SUPPORTED (801)"
refuses "dma-buf, GeForce libcuda: the fix" rdma-step-failed \
  "DMA_BUF_SUPPORTED = 0, as a GeForce reads): run it under 'gdunlock run --rdma"
extra=()
refuses "reg_dmabuf_mr" rdma-step-failed \
  "ibv_reg_dmabuf_mr (GPU buffer) of 65536 bytes failed: Operation not supported (errno 95)" \
  FAKE_IBV_FAIL=reg_dmabuf_mr FAKE_CUDA_DMABUF=1
refuses "reg_dmabuf_mr: the fix" rdma-step-failed "imports no dma-buf" \
  FAKE_IBV_FAIL=reg_dmabuf_mr FAKE_CUDA_DMABUF=1

# A byte the adapter changed on the way: FAIL (exit 1), naming its offset
# (the fake flips the byte at a third of the transfer).
rc=0
out=$(FAKE_IBV_CORRUPT=1 "$gdunlock" verify --rdma --size 1MiB 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "corrupt: exit $rc, want 1 ($out)"
grep -qF "RDMA loopback: FAIL" <<<"$out" || fail "corrupt: no FAIL in: $out"
grep -qF "byte at offset 349525 differs" <<<"$out" || fail "corrupt: no offset in: $out"
doc=$(FAKE_IBV_CORRUPT=1 "$gdunlock" verify --rdma --size 1MiB --json) || true
python3 - "$doc" <<'PY' || fail "corrupt: --json: $doc"
import json, sys
d = json.loads(sys.argv[1])
assert d["exit_code"] == 1 and d["verdict"] == "FAIL" and d["mismatch"]["offset"] == 349525, d
assert d["mismatch"]["wrote"] != d["mismatch"]["read_back"], d
PY

# A PATH with --rdma, and neither: usage errors.
rc=0; "$gdunlock" verify --rdma /tmp/x 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "--rdma PATH: exit $rc, want 64"
rc=0; "$gdunlock" verify 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "no PATH: exit $rc, want 64"
rc=0; "$gdunlock" verify --rdma --route nic 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "--route nic: exit $rc, want 64"
rc=0; "$gdunlock" verify /tmp/x --route dma-buf 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "--route without --rdma: exit $rc, want 64"
echo "PASS: verify --rdma's loopback passes on both routes, fails on a changed byte, and refuses naming the cause, the step and the fix"
