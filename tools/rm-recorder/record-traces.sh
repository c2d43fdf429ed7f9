#!/usr/bin/env bash
# Records the RM/UVM ioctl traces of tests/fixtures/rm-traces/ on a machine
# with an NVIDIA GPU, from a carried build folder. Writes into $OUT:
#   workload-gpu<N>.jsonl + workload-gpu<N>.marks  (tools/rm-recorder/trace_workload.c)
#   torch.jsonl + torch.out                        (a small PyTorch allocation run)
#   load.jsonl + load.out                          (gdunlock load of the small fixture to GPU 0)
#   verify.jsonl + verify.out                      (gdunlock verify --no-shim, 4 MiB buffers)
# RECORD="workload torch load verify" (the default) picks which.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$root/build}
OUT=${OUT:-/tmp/gdu-traces}
mkdir -p "$OUT"
rec=$BUILD/lib/libgdunlock-recorder.so
RECORD=${RECORD:-workload torch load verify}
want() { [[ " $RECORD " == *" $1 "* ]]; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
want workload || ngpu=0
for ((g = 0; g < ngpu; g++)); do
  rm -f "$OUT/workload-gpu$g.jsonl"
  GDU_TRACE=$OUT/workload-gpu$g.jsonl LD_PRELOAD=$rec "$BUILD/bin/gdu_trace_workload" "$g" \
    >"$OUT/workload-gpu$g.marks" 2>&1
  echo "workload gpu$g: rc=$? $(wc -l <"$OUT/workload-gpu$g.jsonl") ioctls"
done
if want load; then
  rm -f "$OUT/load.jsonl"
  GDU_TRACE=$OUT/load.jsonl LD_PRELOAD=$rec "$BUILD/bin/gdunlock" load --gpu 0 --verify --json \
    "$root/tests/fixtures/safetensors/small.safetensors" >"$OUT/load.out" 2>&1
  echo "load: rc=$? $(wc -l <"$OUT/load.jsonl") ioctls"
fi
if want verify; then
  rm -f "$OUT/verify.jsonl" /tmp/gdu-trace-verify.bin
  GDU_TRACE=$OUT/verify.jsonl LD_PRELOAD=$rec "$BUILD/bin/gdunlock" verify --no-shim --size 4M --json \
    /tmp/gdu-trace-verify.bin >"$OUT/verify.out" 2>&1
  echo "verify: rc=$? $(wc -l <"$OUT/verify.jsonl") ioctls"
  rm -f /tmp/gdu-trace-verify.bin
fi
want torch || exit 0
rm -f "$OUT/torch.jsonl"
GDU_TRACE=$OUT/torch.jsonl LD_PRELOAD=$rec python3 - >"$OUT/torch.out" 2>&1 <<'PY'
import torch
xs = [torch.empty(n, dtype=torch.uint8, device="cuda:0") for n in (1, 4096, 1 << 20, 3 << 20, 64 << 20)]
torch.cuda.synchronize()
print("sum", sum(int(x.numel()) for x in xs))
del xs
torch.cuda.empty_cache()
print("done")
PY
echo "torch: rc=$? $(wc -l <"$OUT/torch.jsonl") ioctls"
