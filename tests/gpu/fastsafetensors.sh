#!/usr/bin/env bash
# What vLLM users get today with `gdunlock run -- vllm serve MODEL
# --load-format fastsafetensors` on a GeForce card (issue 21, item 4), shown
# on a datacenter GPU with the shim's GeForce stand-in (libcuda's NV503C
# dropped, its GPU_DIRECT_RDMA_SUPPORTED attribute read as 0):
#   geforce   the shim's answer to that attribute off (GDUNLOCK_RDMA_ATTR=0):
#             fastsafetensors must fall back to its nogds reader
#   unlocked  the shim answers 1: fastsafetensors must take its GDS copier
#             (cuFile; compat mode here, no nvidia-fs)
# In both, every tensor equals safetensors.torch.load_file's. fastsafetensors
# comes from $GDU_FASTSAFETENSORS (a `pip install --target` folder), else the
# carried wheel carry/fastsafetensors-*.whl, installed into a scratch folder.
# cuFile needs udev's entry for the root disk: written here if missing, and
# removed at the end (tests/gpu/udev_root.sh). Needs root for that.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${GDU_ROOT:-$(cd "$here/../.." && pwd)}
BUILD=${BUILD:-$root/build}
OUT=${OUT:-/tmp/gdu-gpu-out}
O="$OUT/fst"
work=${GDU_FST_DIR:-/var/tmp/gdu-fst}
mkdir -p "$O" "$work"
SHIM=$(readlink -f "$BUILD/lib/libgdunlock.so")
if ! python3 -c 'import torch, safetensors; assert torch.cuda.is_available()' 2>/dev/null; then
  echo "SKIP fastsafetensors: no CUDA PyTorch with safetensors here"
  exit 0
fi
fst=${GDU_FASTSAFETENSORS:-}
if [ -z "$fst" ]; then
  wheel=$(ls "$root"/carry/fastsafetensors-*.whl 2>/dev/null | head -1)
  if [ -z "$wheel" ]; then
    echo "SKIP fastsafetensors: no fastsafetensors (GDU_FASTSAFETENSORS, or a wheel in carry/)"
    exit 0
  fi
  fst=$work/site
  python3 -m pip install -q --no-deps --no-index --target "$fst" "$wheel" >"$O/pip.log" 2>&1 ||
    { echo "SKIP fastsafetensors: $wheel did not install: $(tail -1 "$O/pip.log")"; exit 0; }
fi
# shellcheck source=udev_root.sh
. "$here/udev_root.sh"
udev_root_setup "$work" || echo "INFO udev: no entry written: cuFile will refuse files (5027)"
trap udev_root_remove EXIT

python3 - "$work" <<'PY'
import sys, torch, safetensors.torch
torch.manual_seed(0)
t = {f"layers.{i}.w": torch.randn(1024, 1024, dtype=torch.bfloat16) for i in range(24)}
t["odd"] = torch.arange(7, dtype=torch.int32)
safetensors.torch.save_file(t, f"{sys.argv[1]}/fst.safetensors")
PY
for setup in geforce unlocked; do
  extra="GDUNLOCK_RDMA_ATTR=0"
  [ $setup = unlocked ] && extra=""
  # shellcheck disable=SC2086
  env LD_PRELOAD="$SHIM" GDUNLOCK_TEST_DROP_NATIVE=strict GDUNLOCK_TEST_RDMA_ATTR=0 $extra \
    GDUNLOCK_REPORT="$O/$setup-report-%p.json" PYTHONPATH="$fst${PYTHONPATH:+:$PYTHONPATH}" \
    python3 "$here/fst_check.py" "$work/fst.safetensors" >"$O/$setup.out" 2>"$O/$setup.err"
  echo "$? $(grep '^{' "$O/$setup.out" | tail -1)" >"$O/$setup.result"
done
python3 - "$O" <<'PY'
import glob, json, sys
o = sys.argv[1]
for setup, want in (("geforce", "nogds"), ("unlocked", "gds")):
    rc, _, doc = open(f"{o}/{setup}.result").read().partition(" ")
    try:
        d = json.loads(doc)
    except ValueError:
        print(f"FAIL fst-{setup}: exit {rc}, no result: {open(f'{o}/{setup}.err').read()[-300:]}")
        continue
    buffers = 0
    for r in glob.glob(f"{o}/{setup}-report-*.json"):
        try:
            buffers += len(json.load(open(r)).get("cufile_buffers", {}).get("buffers", []))
        except ValueError:
            pass
    ok = rc == "0" and d["copier"] == want and not d["differ"] and not d["missing"]
    print(f"{'PASS' if ok else 'FAIL'} fst-{setup}: fastsafetensors took its {d['copier']} copier "
          f"(want {want}; cuFile buffers registered through the shim: {buffers}), "
          f"{d['tensors']} tensors, {len(d['differ'])} differ from safetensors' "
          f"{d['differ'][:3]}, missing {d['missing'][:3]}; warnings {d['warnings'][:1]}")
PY
