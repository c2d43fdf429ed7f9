#!/usr/bin/env bash
# The loader's calling patterns beside safetensors (issue 21), the pattern
# benchmark, run on the accelerator machine (`BUILD=build OUT=DIR bash
# bench/gpu/patterns.sh`): bench/gpu/load_patterns.py on a
# 5.8 GB Llama-shaped checkpoint in $GDU_PATTERNS_DIR (default
# /var/tmp/gdu-patterns, on a disk), each case in a fresh process. The cold
# case drops the page cache (root). Results: $OUT/load_patterns.json.
# GDU_PATTERNS_CASES picks cases (comma-separated), GDU_PATTERNS_ROUNDS the
# rounds (default 3: of two, the median is the mean, and one disturbed
# process failed a check that its other round passed,
# bench/results/2026-12-04-h200-parts.md). GDU_PATTERNS_RESUME=FILE keeps
# the runs of a load_patterns.json cut short and makes only the others: two
# rounds take more than the 600 s one command may run on the accelerator
# machine.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${GDU_ROOT:-$(cd "$here/../.." && pwd)}
export BUILD=${BUILD:-$root/build}
OUT=${OUT:-/tmp/gdu-gpu-out}
py=${PYTHON:-python3}
mkdir -p "$OUT"
if ! "$py" -c "import torch, safetensors, transformers; assert torch.cuda.device_count() > 0" \
    2>/dev/null; then
  echo "SKIP patterns: $py lacks torch, safetensors, transformers or a GPU"
  exit 0
fi
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
args=(--dir "${GDU_PATTERNS_DIR:-/var/tmp/gdu-patterns}" --gdunlock "$BUILD/bin/gdunlock"
      --out "$OUT" --rounds "${GDU_PATTERNS_ROUNDS:-3}")
[ -n "${GDU_PATTERNS_CASES:-}" ] && args+=(--cases "$GDU_PATTERNS_CASES")
[ -n "${GDU_PATTERNS_RESUME:-}" ] && args+=(--resume "$GDU_PATTERNS_RESUME")
"$py" "$here/load_patterns.py" "${args[@]}"
