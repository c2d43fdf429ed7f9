#!/usr/bin/env bash
# GPUDirect RDMA differential on a datacenter GPU (issue 57 item 5): what
# NCCL 2.28.9's GPUDirect RDMA decision reads, and whether the NIC's lookup
# would find the buffers NCCL registers, natively and under the GeForce
# stand-in (GDUNLOCK_TEST_DROP_NATIVE=strict: libcuda's ThirdPartyP2P object
# gone, every registration the shim's; GDUNLOCK_TEST_RDMA_ATTR=0: libcuda's
# GPUDirect RDMA and DMA-BUF attributes read 0 and its dma-bufs are refused,
# as on GeForce). No NIC is
# needed: the checks are the inputs of NCCL's decision and the lookup model
# (docs/rdma-model.md). Setups, each running build/bin/rdma_nccl_check:
#   native          the shim preloaded, nothing dropped (libcuda's own object)
#   geforce         the stand-in under 'gdunlock run' (without --rdma: today's)
#   geforce-rdma    the stand-in under 'gdunlock run --rdma'
# PASS when, under geforce-rdma, attribute 116 (NCCL's GPU check), 110 and
# pointer attribute 15 equal the native ones, the lookup model finds every
# NCCL buffer as natively (cudaMalloc and VMM), and the shim reports the
# answers it gave NCCL (route a); and for route (b), attribute 124 reads 1 as
# natively and each buffer's dma-buf is made (by the shim's own export) with
# the exporter and size the kernel shows for libcuda's, where the stand-in
# without --rdma refuses it as GeForce libcuda does.
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
# NCCL's route (b) (init.cc:355-371): attribute 124, then a dma-buf of each
# buffer. GeForce libcuda reads 0 and refuses the dma-buf; with --rdma the
# shim answers 1 and makes the dma-buf itself (docs/rdma-model.md section 3).
d_native=$(val native ATTR 124) d_today=$(val geforce ATTR 124) d_rdma=$(val geforce-rdma ATTR 124)
if [ "$d_rdma" = "$d_native" ] && [ "$d_native" = 1 ] && [ "$d_today" = 0 ]; then
  pass attr-124 "the DMA-BUF attribute reads $d_rdma under the stand-in with --rdma, as natively; without --rdma $d_today, as GeForce libcuda"
else
  fail attr-124 "native $d_native, stand-in $d_today, stand-in with --rdma $d_rdma (want 1, 0, 1)"
fi
for b in cudaMalloc-2MiB cudaMalloc-64MiB VMM-4MiB; do
  p_native=$(val native PTRATTR "$b") p_rdma=$(val geforce-rdma PTRATTR "$b")
  if [ "$p_native" = "$p_rdma" ]; then
    pass "ptr-attr-$b" "pointer attribute 15 reads $p_rdma for NCCL under the stand-in with --rdma, as natively"
  else
    fail "ptr-attr-$b" "native $p_native, stand-in with --rdma $p_rdma"
  fi
  # the dma-buf: made natively by libcuda, refused under the stand-in as
  # GeForce libcuda refuses it (801), made by the shim with --rdma; the
  # kernel took the shim's memory handles (osapi.c:1286-1360 checks them)
  # and shows the same exporter and size for both
  read -r _ _ s_native z_native e_native <<<"$(grep "^DMABUF $b " "$O/native.out")"
  read -r _ _ s_today _ _ <<<"$(grep "^DMABUF $b " "$O/geforce.out")"
  read -r _ _ s_rdma z_rdma e_rdma <<<"$(grep "^DMABUF $b " "$O/geforce-rdma.out")"
  if [ "$s_native" = 0 ] && [ "$s_rdma" = 0 ] && [ "$z_rdma" = "$z_native" ] && [ "$e_rdma" = "$e_native" ] && [ "$s_today" = 801 ]; then
    pass "dmabuf-$b" "a dma-buf of NCCL's buffer: exporter $e_rdma, $z_rdma bytes under the stand-in with --rdma (the shim's export), as natively (libcuda's); without --rdma refused ($s_today)"
  else
    fail "dmabuf-$b" "native: status ${s_native:-?} size ${z_native:-?} ${e_native:-?}; stand-in: ${s_today:-?}; stand-in with --rdma: status ${s_rdma:-?} size ${z_rdma:-?} ${e_rdma:-?} (want 0, 801, 0 with the native size and exporter)"
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
exports = sum((g.get("dma_buf") or {}).get("exports", 0) for g in rdma.get("gpus", []))
today_exports = sum((g.get("dma_buf") or {}).get("exports", 0) for g in today.get("gpus", []))
ok = ("unlocked" in modes and a.get("rdma_network") is True and a.get("answered_1_for_network", 0) >= 1
      and exports == 3 and today_exports == 0)
print(("PASS" if ok else "FAIL") + " shim-report: under --rdma GPU mode %s, rdma_network %s, answered NCCL %s time(s), %d dma-buf(s) made; without it kept for %s, %d made"
      % (modes, a.get("rdma_network"), a.get("answered_1_for_network"), exports, t.get("kept_for"), today_exports))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || failed=1
if [ $failed = 0 ]; then
  echo "PASS rdma-differential: under the GeForce stand-in with 'gdunlock run --rdma', NCCL's GPUDirect RDMA inputs (routes a and b), the lookup of its buffers and their dma-bufs equal the native GPU's (outputs in $O)"
else
  echo "FAIL rdma-differential: see the FAIL lines (outputs in $O)"
fi
exit $failed
