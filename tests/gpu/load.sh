#!/usr/bin/env bash
# GPU check of `gdunlock load` (run by tests/gpu/run.sh on the accelerator
# machine): makes a >= 8 GiB LLM-like checkpoint with the safetensors library
# in $GDU_LOAD_DIR (default /tmp/gdu-load), then measures in one run, page
# cache warm, safetensors.torch.load_file vs gdunlock (Python and CLI) vs the
# engine's raw read, checks torch.equal on every tensor, a sharded checkpoint
# on 2 GPUs when present, and device="cpu". Prints PASS/FAIL/SKIP lines;
# results go to $OUT/load_results.{json,md}, logs to $OUT/load_*.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${GDU_ROOT:-$(cd "$here/../.." && pwd)}
export BUILD=${BUILD:-$root/build}
OUT=${OUT:-/tmp/gdu-gpu-out}
work=${GDU_LOAD_DIR:-/tmp/gdu-load}
py=${PYTHON:-python3}
mkdir -p "$OUT"

if [ ! -x "$BUILD/bin/gdunlock" ] || [ ! -f "$BUILD/lib/libgdunlock-load.so" ]; then
  echo "FAIL load-build: $BUILD/bin/gdunlock or $BUILD/lib/libgdunlock-load.so missing"
  exit 0
fi
if ! "$py" -c "import torch, safetensors" 2>/dev/null; then
  echo "SKIP load: $py lacks torch or safetensors"
  exit 0
fi
ngpu=$("$py" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "${ngpu:-0}" -lt 1 ]; then
  echo "SKIP load: no CUDA GPU visible to torch"
  "$BUILD/bin/gdunlock" load "$root/tests/fixtures/safetensors/small.safetensors" >"$OUT/load_nogpu.log" 2>&1
  echo "SKIP load-nogpu: gdunlock load without a GPU exited $? ($(tail -2 "$OUT/load_nogpu.log" | head -1))"
  exit 0
fi
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"

start=$(date +%s)
if ! "$py" "$here/load_make_checkpoint.py" --dir "$work" --gib 8 >"$OUT/load_make.log" 2>&1; then
  echo "FAIL load-checkpoint: could not create it: $(tail -1 "$OUT/load_make.log")"
  exit 0
fi
echo "# $(tail -1 "$OUT/load_make.log")"
"$py" "$here/load_bench.py" --dir "$work" --gdunlock "$BUILD/bin/gdunlock" --out "$OUT" \
  2>"$OUT/load_bench.log"
echo "# load checks took $(( $(date +%s) - start )) s; results in $OUT/load_results.md"
[ "${GDU_LOAD_KEEP:-0}" = 1 ] || rm -rf "$work"
exit 0
