#!/usr/bin/env bash
# GPU checks of the shim's answer to CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
# (issue 11, item 4) and of libcufile's GPU gate, on a datacenter GPU where
# libcuda answers 1: GDUNLOCK_TEST_RDMA_ATTR=0 makes libcuda's answer read 0
# as on GeForce, GDUNLOCK_RDMA_ATTR=0 turns the shim's answer off, and the
# strict test mode (GDUNLOCK_TEST_DROP_NATIVE=strict) is the GeForce state of
# the ThirdPartyP2P object. Setups:
#   plain     no shim
#   native    the shim, nothing dropped (a native GPU stays untouched)
#   geforce   strict + libcuda's attribute 0 + the shim's answer off
#   unlocked  strict + libcuda's attribute 0 + the shim's answer on
# Checks: every route of shim_attr_check; libcufile's TRACE log and status
# for a cuFileBufRegister and a cuFileRead (cufile_gate, its file on a disk
# with udev's entry written when missing: needs root); PyTorch's libcudart; fastsafetensors'
# is_gds_supported (FST_DIR: where its build lies); NCCL's choice through
# torch.distributed (its GDR lines, and whom the shim kept libcuda's 0 for).
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
O="$OUT/attr"
mkdir -p "$O"
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "SKIP $1: $2"; }
SHIM=$(readlink -f "$BUILD/lib/libgdunlock.so")
BIN="$BUILD/bin"
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  skip shim-attr "no NVIDIA GPU here"
  exit 0
fi

setup_env() { # SETUP -> env assignments
  case $1 in
    plain) echo "LD_PRELOAD=" ;;
    native) echo "LD_PRELOAD=$SHIM" ;;
    geforce) echo "LD_PRELOAD=$SHIM GDUNLOCK_TEST_DROP_NATIVE=strict GDUNLOCK_TEST_RDMA_ATTR=0 GDUNLOCK_RDMA_ATTR=0" ;;
    unlocked) echo "LD_PRELOAD=$SHIM GDUNLOCK_TEST_DROP_NATIVE=strict GDUNLOCK_TEST_RDMA_ATTR=0" ;;
  esac
}
# run_in SETUP NAME CMD...: CMD in that setup; out/err/report under $O/SETUP-NAME.*
run_in() {
  local setup=$1 name=$2
  shift 2
  # shellcheck disable=SC2046
  env $(setup_env "$setup") GDUNLOCK_REPORT="$O/$setup-$name-report-%p.json" "$@" \
    >"$O/$setup-$name.out" 2>"$O/$setup-$name.err"
  local rc=$?
  [ $rc = 0 ] || echo "EXIT $rc" >>"$O/$setup-$name.err"
  return $rc
}
routes() { grep '^ROUTE' "$O/$1-routes.out" | cut -d' ' -f2- | tr '\n' ';'; }

cudart=""
for c in /usr/local/cuda/lib64/libcudart.so.13 /usr/local/cuda/lib64/libcudart.so; do
  [ -f "$c" ] && cudart=$c && break
done
if [ -z "$cudart" ]; then
  cudart=$(python3 -c 'import nvidia.cuda_runtime as m, os, glob; print(sorted(glob.glob(os.path.join(list(m.__path__)[0], "lib", "libcudart.so*")))[-1])' 2>/dev/null)
fi

for s in plain native geforce unlocked; do
  run_in "$s" routes "$BIN/shim_attr_check" "${cudart:-libcudart.so}"
  [ -x "$BIN/shim_attr_direct" ] && env $(setup_env "$s") "$BIN/shim_attr_direct" >>"$O/$s-routes.out" 2>>"$O/$s-routes.err"
done
want_routes() { # SETUP EXPECTED-RDMA-LIBRARY-VALUE EXPECTED-OTHERS
  local s=$1 lib=$2 others=$3 bad
  bad=$(grep '^ROUTE' "$O/$s-routes.out" | grep -v unavailable | awk -v l="$lib" -v o="$others" \
    '($2 == "rdma-library" && $3 != l) || ($2 != "rdma-library" && $3 != o)')
  n=$(grep '^ROUTE' "$O/$s-routes.out" | grep -vc unavailable)
  [ -z "$bad" ] && [ "$n" -ge 5 ]
}
want_routes plain 1 1 && pass attr-plain "no shim, the H200's own answer: $(routes plain)" || fail attr-plain "$(routes plain)"
want_routes native 1 1 && pass attr-native-untouched "shim, native GPU: libcuda's answers pass unchanged: $(routes native)" \
  || fail attr-native-untouched "$(routes native)"
want_routes geforce 0 0 && pass attr-geforce "GeForce stand-in (libcuda's 0, the shim's answer off): $(routes geforce)" \
  || fail attr-geforce "$(routes geforce)"
want_routes unlocked 0 1 && pass attr-unlocked "the shim's answer on an unlocked GPU: 1 on every route, libcuda's 0 for a library named like NCCL's: $(routes unlocked)" \
  || fail attr-unlocked "$(routes unlocked)"

# ---- the per-buffer attribute (15) on every route ----
proutes() { grep "^PROUTE .* $2 " "$O/$1-routes.out" | cut -d' ' -f2,4- | tr '\n' ';'; }
want_proutes() { # SETUP DEVICE-RDMA-LIBRARY-VALUE DEVICE-OTHERS
  local s=$1 lib=$2 others=$3 bad n
  bad=$(grep '^PROUTE .* device ' "$O/$s-routes.out" | awk -v l="$lib" -v o="$others" \
    '($2 == "rdma-library" && $4 != l) || ($2 != "rdma-library" && $4 != o)')
  n=$(grep -c '^PROUTE .* device [0-9]' "$O/$s-routes.out")
  [ -z "$bad" ] && [ "$n" -ge 5 ]
}
want_proutes plain 1 1 && pass pattr-plain "no shim, attribute 15 of a cuMemAlloc buffer: $(proutes plain device) host memory: $(proutes plain host)" \
  || fail pattr-plain "$(proutes plain device) host: $(proutes plain host)"
if want_proutes native 1 1 && [ "$(proutes native host)" = "$(proutes plain host)" ]; then
  pass pattr-native-untouched "shim, native GPU: libcuda's answers pass: $(proutes native device)"
else
  fail pattr-native-untouched "$(proutes native device) host: $(proutes native host) (plain: $(proutes plain host))"
fi
want_proutes geforce 0 0 && pass pattr-geforce "GeForce stand-in, the shim's answer off: libcuda's answer reads 0: $(proutes geforce device)" \
  || fail pattr-geforce "$(proutes geforce device)"
if want_proutes unlocked 0 1 && [ "$(proutes unlocked host)" = "$(proutes geforce host)" ]; then
  pass pattr-unlocked "stand-in, a buffer the shim registered: 1 on every route, libcuda's 0 for the NCCL-named library, memory it did not register as libcuda says: $(proutes unlocked device) host: $(proutes unlocked host)"
else
  fail pattr-unlocked "$(proutes unlocked device) host: $(proutes unlocked host) (geforce host: $(proutes geforce host))"
fi

# ---- libcufile's gate: its TRACE log and the status of cuFileBufRegister ----
# The file cufile_gate reads lies on a disk (GDU_ATTR_DIR, default
# /var/tmp/gdu-attr) with udev's entry for its file system, where compat
# mode reads files on the H200 (shared/reference/driver-findings.md): under
# $OUT (/tmp/g) libcufile refused it with 5018 and cuFileRead, whose calls
# issue 24 lists, was never reached. Writing the entry needs root.
here=$(cd "$(dirname "$0")" && pwd)
gate_dir=${GDU_ATTR_DIR:-/var/tmp/gdu-attr}
mkdir -p "$gate_dir"
# shellcheck source=udev_root.sh
. "$here/udev_root.sh"
udev_root_setup "$gate_dir" || echo "INFO udev: no entry written: cuFile will refuse the file (5027)"
trap 'udev_root_remove; rm -f "$gate_dir"/cufile-*.bin' EXIT
echo "INFO cufile-gate-file: $gate_dir on $(findmnt -n -o FSTYPE --target "$gate_dir" 2>/dev/null || echo unknown)"
for s in plain geforce unlocked; do
  mkdir -p "$O/cufile-$s"
  cat >"$O/cufile-$s.json" <<EOF
{ "logging": { "dir": "$O/cufile-$s", "level": "TRACE" },
  "properties": { "allow_compat_mode": true } }
EOF
  head -c 4194304 /dev/urandom >"$gate_dir/cufile-$s.bin"
  run_in "$s" gate env CUFILE_ENV_PATH_JSON="$O/cufile-$s.json" GDUNLOCK_LOG=debug "$BIN/cufile_gate" "$gate_dir/cufile-$s.bin"
  # What libcufile resolved and asked, call by call (the shim's trace).
  grep -E '^PHASE |gdunlock: libcufile' "$O/$s-gate.err" >"$O/libcufile-trace-$s.log"
  log=$(ls "$O/cufile-$s"/*.log 2>/dev/null | head -1)
  attr_line=$( [ -n "$log" ] && grep -m1 -i 'GPU_DIRECT_RDMA_SUPPORTED' "$log" | sed 's/^.*\(cuDeviceGetAttribute\)/\1/' | cut -c1-160)
  gate_line=$( [ -n "$log" ] && grep -m1 -i 'not supported on gpu\|GPUDirect Storage not supported' "$log" | cut -c1-200)
  steps=$(grep '^STEP' "$O/$s-gate.out" | cut -d' ' -f2-3 | tr '\n' ';')
  echo "INFO cufile-gate-$s: steps $steps | attribute line: ${attr_line:-none} | gate line: ${gate_line:-none}"
  asked=$(grep -oE 'calls cu[A-Za-z]+\([0-9,]+\)' "$O/libcufile-trace-$s.log" | sort | uniq -c | awk '{print $3 " x" $1}' | tr '\n' ' ')
  nvml=$(grep -c 'resolves nvml' "$O/libcufile-trace-$s.log")
  echo "INFO libcufile-trace-$s: $(grep -c resolves "$O/libcufile-trace-$s.log") names resolved ($nvml NVML), attributes asked: ${asked:-none} ($O/libcufile-trace-$s.log)"
  # libcufile's P2PDMA probe (issue 24, item 4): a dma-buf handle, if it asks for one
  probe=$(grep -o 'calls cuMemGetHandleForAddressRange(.*' "$O/libcufile-trace-$s.log" | sed 's/0x[0-9a-f]*, //' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  echo "INFO libcufile-p2pdma-probe-$s: ${probe:-no cuMemGetHandleForAddressRange call}; its log: $(grep -h 'pci_p2pdma not supported\|Is PCIP2PDMA Supported' "$O/cufile-$s"/*.log 2>/dev/null | sed 's/^.*\] //' | sort -u | tr '\n' ';')"
done
r_plain=$(sed -n 's/^STEP cuFileRead //p' "$O/plain-gate.out")
r_unlocked=$(sed -n 's/^STEP cuFileRead //p' "$O/unlocked-gate.out")
if [ -n "$r_plain" ] && [ "$r_plain" = "$r_unlocked" ] && [ "${r_plain#* }" = bytes-match ]; then
  pass cufile-read-unchanged "compat-mode cuFileRead of 1 MiB: '$r_plain' without the shim, '$r_unlocked' under the unlocked stand-in"
elif grep -q '^STEP cuFileHandleRegister [1-9]' "$O/plain-gate.out"; then
  skip cufile-read-unchanged "libcufile refuses the file here: $(grep '^STEP cuFileHandleRegister' "$O/plain-gate.out")"
else
  fail cufile-read-unchanged "plain '$r_plain', unlocked '$r_unlocked'"
fi
reg_plain=$(sed -n 's/^STEP cuFileBufRegister \([0-9]*\).*/\1/p' "$O/plain-gate.out")
reg_geforce=$(sed -n 's/^STEP cuFileBufRegister \([0-9]*\).*/\1/p' "$O/geforce-gate.out")
reg_unlocked=$(sed -n 's/^STEP cuFileBufRegister \([0-9]*\).*/\1/p' "$O/unlocked-gate.out")
if [ -n "$reg_plain" ] && [ -n "$reg_geforce" ] && [ -n "$reg_unlocked" ]; then
  if [ "$reg_geforce" != 0 ] && [ "$reg_unlocked" = 0 ]; then
    pass cufile-gate "libcufile refuses cuFileBufRegister where the attribute reads 0 (status $reg_geforce) and accepts it with the shim's answer (status $reg_unlocked; no shim: $reg_plain)"
  elif [ "$reg_geforce" = 0 ] && [ "$reg_unlocked" = 0 ]; then
    pass cufile-gate "in compat mode libcufile registers the buffer whatever the attribute says (status 0 with 0 and with 1; no shim $reg_plain): see the INFO lines for what its TRACE log says"
  else
    fail cufile-gate "cuFileBufRegister: plain $reg_plain, geforce $reg_geforce, unlocked $reg_unlocked"
  fi
else
  fail cufile-gate "no cuFileBufRegister status: $(cat "$O/plain-gate.out" "$O/geforce-gate.out" "$O/unlocked-gate.out" | tr '\n' ' ')"
fi

# ---- PyTorch's libcudart and fastsafetensors' own check ----
if python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
  cat >"$O/torch_attr.py" <<'PY'
import ctypes, glob, os, torch
torch.cuda.init()
torch.empty(1, device="cuda")
paths = [p for p in open("/proc/self/maps").read().split() if "libcudart.so" in p]
rt = ctypes.CDLL(paths[0] if paths else "libcudart.so")
v = ctypes.c_int(-1)
r = rt.cudaDeviceGetAttribute(ctypes.byref(v), 116, 0)
print("TORCH_CUDART", os.path.basename(paths[0]) if paths else "libcudart.so", r, v.value)
PY
  for s in plain geforce unlocked; do
    run_in "$s" torch python3 "$O/torch_attr.py"
  done
  t="plain $(cut -d' ' -f3- "$O/plain-torch.out"); geforce $(cut -d' ' -f3- "$O/geforce-torch.out"); unlocked $(cut -d' ' -f3- "$O/unlocked-torch.out")"
  if grep -q ' 0 1$' "$O/plain-torch.out" && grep -q ' 0 0$' "$O/geforce-torch.out" && grep -q ' 0 1$' "$O/unlocked-torch.out"; then
    pass attr-torch "cudaDeviceGetAttribute(116) through PyTorch's libcudart ($(cut -d' ' -f2 "$O/plain-torch.out")), status and value: $t"
  else
    fail attr-torch "$t; $(tail -1 "$O/unlocked-torch.err")"
  fi
else
  skip attr-torch "no CUDA PyTorch"
fi
if [ -n "${FST_DIR:-}" ] && [ -d "$FST_DIR/fastsafetensors" ]; then
  for s in plain geforce unlocked; do
    # as fastsafetensors' GDS copier does it: its library functions loaded first
    run_in "$s" fst env PYTHONPATH="$FST_DIR${PYTHONPATH:+:$PYTHONPATH}" LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      python3 -c 'import torch; torch.cuda.init()
from fastsafetensors.copier.nogds import load_library_func
load_library_func()
from fastsafetensors import cpp
print("FST_GDS_SUPPORTED", cpp.is_gds_supported(0))'
  done
  f="plain $(sed -n 's/^FST_GDS_SUPPORTED //p' "$O/plain-fst.out"), geforce $(sed -n 's/^FST_GDS_SUPPORTED //p' "$O/geforce-fst.out"), unlocked $(sed -n 's/^FST_GDS_SUPPORTED //p' "$O/unlocked-fst.out")"
  if [ "$f" = "plain 1, geforce 0, unlocked 1" ]; then
    pass attr-fastsafetensors "fastsafetensors' is_gds_supported(0) (its switch to the CPU path at 0): $f"
  else
    fail attr-fastsafetensors "$f; $(tail -n 3 "$O/plain-fst.err" "$O/unlocked-fst.err" | tr '\n' ' ')"
  fi
else
  skip attr-fastsafetensors "no fastsafetensors build (FST_DIR)"
fi

# ---- NCCL: its GPUDirect RDMA choice is unchanged ----
if python3 -c 'import torch, torch.distributed as d; assert torch.cuda.is_available() and d.is_nccl_available()' >/dev/null 2>&1; then
  cat >"$O/nccl_check.py" <<'PY'
import os, tempfile, torch, torch.distributed as dist
f = tempfile.NamedTemporaryFile(delete=False)
dist.init_process_group("nccl", init_method="file://" + f.name, rank=0, world_size=1)
x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("NCCL_SUM", float(x.sum().item()))
dist.destroy_process_group()
PY
  for s in plain unlocked; do
    run_in "$s" nccl env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH python3 "$O/nccl_check.py"
  done
  gp=$(grep -i -c 'GDR\|GPU Direct RDMA\|GPUDirect' "$O/plain-nccl.out" "$O/plain-nccl.err" | awk -F: '{s+=$2} END {print s}')
  gu=$(grep -i -c 'GDR\|GPU Direct RDMA\|GPUDirect' "$O/unlocked-nccl.out" "$O/unlocked-nccl.err" | awk -F: '{s+=$2} END {print s}')
  lp=$(grep -h -i 'GDR\|GPU Direct RDMA\|GPUDirect' "$O/plain-nccl.out" "$O/plain-nccl.err" | sed 's/^.*NCCL INFO //' | sort -u | head -3 | tr '\n' ';')
  lu=$(grep -h -i 'GDR\|GPU Direct RDMA\|GPUDirect' "$O/unlocked-nccl.out" "$O/unlocked-nccl.err" | sed 's/^.*NCCL INFO //' | sort -u | head -3 | tr '\n' ';')
  rep=$(ls -t "$O"/unlocked-nccl-report-*.json 2>/dev/null | head -1)
  kept=$([ -n "$rep" ] && python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["gpu_direct_rdma_attribute"]; print("asked %d, answered 1 %d, kept %d for %s" % (a["asked_with_0"], a["answered_1"], a["kept"], a["kept_for"]))' "$rep")
  sp=$(sed -n 's/^NCCL_SUM //p' "$O/plain-nccl.out"); su=$(sed -n 's/^NCCL_SUM //p' "$O/unlocked-nccl.out")
  if [ -n "$sp" ] && [ "$sp" = "$su" ] && [ "$lp" = "$lu" ]; then
    pass attr-nccl "NCCL all_reduce sum $su both ways; NCCL's GDR lines the same without and with the shim ($gp / $gu lines: ${lu:-none}); the shim's attribute answers in the NCCL run: ${kept:-no report}"
  else
    fail attr-nccl "sums '$sp' / '$su'; GDR lines plain '${lp}' vs unlocked '${lu}'; shim: ${kept:-no report}; $(tail -2 "$O/unlocked-nccl.err" | tr '\n' ' ')"
  fi
else
  skip attr-nccl "no torch with NCCL"
fi
exit 0
