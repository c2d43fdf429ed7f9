#!/usr/bin/env bash
# Records the RM/UVM ioctl traces of tests/fixtures/rm-traces/ on a machine
# with an NVIDIA GPU, from a carried build folder. Writes into $OUT:
#   workload-gpu<N>.jsonl + workload-gpu<N>.marks  (tools/rm-recorder/trace_workload.c)
#   torch.jsonl + torch.out                        (a small PyTorch allocation run)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$root/build}
OUT=${OUT:-/tmp/gdu-traces}
mkdir -p "$OUT"
rec=$BUILD/lib/libgdunlock-recorder.so
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
for ((g = 0; g < ngpu; g++)); do
  rm -f "$OUT/workload-gpu$g.jsonl"
  GDU_TRACE=$OUT/workload-gpu$g.jsonl LD_PRELOAD=$rec "$BUILD/bin/gdu_trace_workload" "$g" \
    >"$OUT/workload-gpu$g.marks" 2>&1
  echo "workload gpu$g: rc=$? $(wc -l <"$OUT/workload-gpu$g.jsonl") ioctls"
done
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
