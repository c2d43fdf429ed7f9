#!/usr/bin/env bash
# GPUDirect RDMA differential on a datacenter GPU (issue 57 item 5): what
# NCCL 2.28.9's GPUDirect RDMA decision reads, and whether the NIC's lookup
# would find the buffers NCCL registers, natively and under the GeForce
# stand-in (GDUNLOCK_TEST_DROP_NATIVE=strict: libcuda's ThirdPartyP2P object
# gone, every registration the shim's; GDUNLOCK_TEST_RDMA_ATTR=0: libcuda's
# GPUDirect RDMA and DMA-BUF attributes read 0, as on GeForce). No NIC is
# needed: the checks are the inputs of NCCL's decision and the lookup model
# (docs/rdma-model.md). Setups, each running build/bin/rdma_nccl_check:
#   native          the shim preloaded, nothing dropped (libcuda's own object)
#   geforce         the stand-in under 'gdunlock run' (without --rdma: today's)
#   geforce-rdma    the stand-in under 'gdunlock run --rdma'
# PASS when, under geforce-rdma, attribute 116 (NCCL's GPU check), 110 and
# pointer attribute 15 equal the native ones, the lookup model finds every
# NCCL buffer as natively (cudaMalloc and VMM), and the shim reports the
# answers it gave NCCL; attribute 124 (the DMA-BUF route) must read 0 there:
# the shim makes no dma-buf (a named difference, not a failure).
# Usage: BUILD=build OUT=/tmp/out tests/gpu/rdma_differential.sh; exit 0 pass, 1 fail.
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
O="$OUT/rdma"
mkdir -p "$O"
BIN=$(readlink -f "$BUILD/bin")
SHIM=$(readlink -f "$BUILD/lib/libgdunlock.so")
failed=0
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; failed=1; }
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  echo "SKIP rdma-differential: no NVIDIA GPU here"
  exit 0
fi
echo "INFO torch's NCCL: $(python3 -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())), "(torch", torch.__version__ + ")")' 2>&1 | tail -1)"
echo "INFO driver: $(cat /sys/module/nvidia/version 2>/dev/null || echo unknown)"

STANDIN="GDUNLOCK_TEST_DROP_NATIVE=strict GDUNLOCK_TEST_RDMA_ATTR=0"
# shellcheck disable=SC2086
LD_PRELOAD=$SHIM GDUNLOCK_REPORT="$O/native-report-%p.json" \
  "$BIN/rdma_nccl_check" >"$O/native.out" 2>"$O/native.err"
# shellcheck disable=SC2086
env $STANDIN "$BIN/gdunlock" run --report "$O/geforce-report.json" -- \
  "$BIN/rdma_nccl_check" >"$O/geforce.out" 2>"$O/geforce.err"
# shellcheck disable=SC2086
env $STANDIN "$BIN/gdunlock" run --rdma --report "$O/geforce-rdma-report.json" -- \
  "$BIN/rdma_nccl_check" >"$O/geforce-rdma.out" 2>"$O/geforce-rdma.err"
for s in native geforce geforce-rdma; do
  grep -q '^ATTR 116 ' "$O/$s.out" || { fail "run-$s" "no output: $(tail -3 "$O/$s.out" "$O/$s.err" | tr '\n' ' ')"; }
done
[ $failed = 0 ] || { echo "FAIL rdma-differential: a setup did not run (outputs in $O)"; exit 1; }

val() { awk -v k="$2" -v n="$3" '$1 == k && $2 == n { print $3; exit }' "$O/$1.out"; }
pin() { awk -v n="$2" '$1 == "PIN" && $3 == n { print $4; exit }' "$O/$1.out"; }

# NCCL's GPU check (plugin/net.cc:452-463): attribute 116, asked from libnccl*.
a_native=$(val native ATTR 116) a_today=$(val geforce ATTR 116) a_rdma=$(val geforce-rdma ATTR 116)
if [ "$a_rdma" = "$a_native" ] && [ "$a_native" = 1 ]; then
  pass attr-116 "NCCL's GPU check reads $a_rdma under the stand-in with --rdma, as natively ($a_native); without --rdma it reads $a_today"
else
  fail attr-116 "native $a_native, stand-in $a_today, stand-in with --rdma $a_rdma (want 1 and 1)"
fi
[ "$a_today" = 0 ] || echo "NOTE attr-116: without --rdma NCCL read $a_today under the stand-in (expected 0: the shim keeps libcuda's answer for NCCL)"
v_native=$(val native ATTR 110) v_rdma=$(val geforce-rdma ATTR 110)
if [ "$v_native" = "$v_rdma" ]; then
  pass attr-110 "the VMM GPUDirect RDMA attribute NCCL's cuMemCreate reads: $v_rdma, as natively"
else
  fail attr-110 "native $v_native, stand-in with --rdma $v_rdma"
fi
d_native=$(val native ATTR 124) d_rdma=$(val geforce-rdma ATTR 124)
if [ "$d_rdma" = 0 ]; then
  pass attr-124 "the DMA-BUF attribute reads 0 under the stand-in with --rdma (natively $d_native): NCCL stays on the peer-memory route; the shim makes no dma-buf (a named difference, docs/rdma-model.md)"
else
  fail attr-124 "the stand-in left the DMA-BUF attribute at $d_rdma (want 0, as GeForce libcuda)"
fi
for b in cudaMalloc-2MiB cudaMalloc-64MiB VMM-4MiB; do
  p_native=$(val native PTRATTR "$b") p_rdma=$(val geforce-rdma PTRATTR "$b")
  if [ "$p_native" = "$p_rdma" ]; then
    pass "ptr-attr-$b" "pointer attribute 15 reads $p_rdma for NCCL under the stand-in with --rdma, as natively"
  else
    fail "ptr-attr-$b" "native $p_native, stand-in with --rdma $p_rdma"
  fi
  l_native=$(pin native "$b") l_rdma=$(pin geforce-rdma "$b")
  if [ "$l_rdma" = found ] && [ "$l_native" = found ]; then
    pass "lookup-$b" "nvidia-peermem's lookup (the model) finds NCCL's buffer natively and under the stand-in (the shim's registration)"
  else
    fail "lookup-$b" "lookup model: native ${l_native:-none}, stand-in with --rdma ${l_rdma:-none} (want found): $(grep "^PIN 0 $b " "$O/geforce-rdma.out")"
  fi
done
# The shim's account: GPU unlocked, answers given to NCCL.
python3 - "$O/geforce-rdma-report.json" "$O/geforce-report.json" <<'PY'
import json, sys
def first(path):
    d = json.load(open(path))
    procs = d.get("processes") or []
    return procs[0] if procs else {}
rdma, today = first(sys.argv[1]), first(sys.argv[2])
modes = [g.get("mode") for g in rdma.get("gpus", [])]
a = rdma.get("gpu_direct_rdma_attribute", {})
t = today.get("gpu_direct_rdma_attribute", {})
ok = "unlocked" in modes and a.get("rdma_network") is True and a.get("answered_1_for_network", 0) >= 1
print(("PASS" if ok else "FAIL") + " shim-report: under --rdma GPU mode %s, rdma_network %s, answered NCCL %s time(s); without it kept for %s"
      % (modes, a.get("rdma_network"), a.get("answered_1_for_network"), t.get("kept_for")))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || failed=1
if [ $failed = 0 ]; then
  echo "PASS rdma-differential: under the GeForce stand-in with 'gdunlock run --rdma', NCCL's GPUDirect RDMA inputs (route a) and the lookup of its buffers equal the native GPU's (outputs in $O)"
else
  echo "FAIL rdma-differential: see the FAIL lines (outputs in $O)"
fi
exit $failed
