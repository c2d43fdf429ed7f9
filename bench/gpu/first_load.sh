#!/usr/bin/env bash
# Where a fresh process's first load loses time against the engine's steady
# rate (issue 12, item 4). INFO lines only, for a study; load.sh's
# load-first-vs-ceiling is the verdict.
#   1. first_load_costs.py: each CUDA call the engine makes when it starts,
#      timed straight through libcuda in a fresh process;
#   2. `gdunlock load --json` of the 8 GiB checkpoint (load.sh's, made here
#      when missing), fresh process each, over workers x staging slots x
#      chunk size (GDUNLOCK_IO_*; GDU_FIRST_WORKERS, _STAGING, _CHUNKS narrow
#      them), 2 runs each: the transfer stage;
#   3. the first and the second load_safetensors in one Python process;
#   4. the same, split by stage (first_load_stages.py), cold and after each
#      warm-up that could remove the first load's extra cost: spinning CPUs,
#      busy copy engines, fresh video memory used and freed, a separate
#      engine reading another 8 GiB file, a load of another checkpoint (the
#      sharded one);
#   5. `gdunlock bench` host and h2d rows on the same file (the ceiling).
# Results: $OUT/first_load.jsonl.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${GDU_ROOT:-$(cd "$here/../.." && pwd)}
BUILD=${BUILD:-$root/build}
OUT=${OUT:-/tmp/gdu-gpu-out}
work=${GDU_LOAD_DIR:-/var/tmp/gdu-load}
py=${PYTHON:-python3}
mkdir -p "$OUT" "$work"
res=$OUT/first_load.jsonl
: >"$res"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"

"$py" "$root/tests/gpu/load_make_checkpoint.py" --dir "$work" --gib 8 >"$OUT/first_load_make.log" 2>&1 ||
  { echo "FAIL first-load-checkpoint: $(tail -1 "$OUT/first_load_make.log")"; exit 0; }
ckpt=$work/model.safetensors
cat "$ckpt" >/dev/null

for args in "8 3 4194304" "8 3 16777216"; do
  line=$("$py" "$here/first_load_costs.py" $args 2>&1 | tail -1)
  echo "$line" | sed 's/^/{"costs": /; s/$/}/' >>"$res"
  echo "INFO first-load-costs ($args): $line"
done

for w in ${GDU_FIRST_WORKERS:-4 8 16}; do
  for st in ${GDU_FIRST_STAGING:-1 2 3}; do
    for ch in ${GDU_FIRST_CHUNKS:-4M 8M 16M}; do
      for rep in 1 2; do
        j=$(GDUNLOCK_IO_WORKERS=$w GDUNLOCK_IO_STAGING=$st GDUNLOCK_IO_CHUNK=$ch \
            "$BUILD/bin/gdunlock" load "$ckpt" --json 2>/dev/null)
        printf '{"workers": %s, "staging": %s, "chunk": "%s", "load": %s}\n' "$w" "$st" "$ch" \
          "${j:-null}" >>"$res"
        t=$(printf '%s' "$j" | "$py" -c 'import json,sys; d=json.load(sys.stdin); s=d["stages_seconds"]; print("transfer %.4f s, %.2f GB/s; total %.4f" % (s["transfer"], d["read_bytes"] / s["transfer"] / 1e9, s["load_total"]))' 2>&1)
        echo "INFO first-load-cli workers $w staging $st chunk $ch run $rep: $t"
      done
    done
  done
done

for rep in 1 2 3; do
  line=$("$py" - "$ckpt" <<'EOF' 2>&1 | tail -1
import json, sys, time
import torch
import gdunlock
torch.cuda.init(); torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
out = {}
for k in ("first", "second", "third"):
    t = time.perf_counter()
    d = gdunlock.load_safetensors(sys.argv[1], device=0)
    torch.cuda.synchronize()
    s = time.perf_counter() - t
    n = sum(x.numel() * x.element_size() for x in d.values())
    out[k] = {"seconds": s, "gbps": n / s / 1e9}
    del d
    torch.cuda.empty_cache()
print(json.dumps(out))
EOF
)
  echo "$line" | sed 's/^/{"in_process": /; s/$/}/' >>"$res"
  echo "INFO first-load-in-process run $rep: $line"
done

[ -f "$work/other.bin" ] || cp "$ckpt" "$work/other.bin"
cat "$work/other.bin" "$work"/sharded/*.safetensors >/dev/null
for rep in 1 2 3; do
  for warm in "" "--busy-cpu 400" "--busy-copy 300" "--prealloc 9" "--warm-engine $work/other.bin" \
              "--warm-up $work/sharded/model.safetensors.index.json"; do
    # shellcheck disable=SC2086
    line=$("$py" "$here/first_load_stages.py" "$ckpt" $warm 2>&1 | tail -1)
    printf '{"stages": %s}\n' "${line:-null}" >>"$res"
    echo "INFO first-load-stages ${warm:-cold} run $rep: $(printf '%s' "$line" | "$py" -c 'import json,sys; d=json.load(sys.stdin); print("; ".join("%s %.1f ms (alloc %.1f, transfer %.1f)" % (k, d[k]["total_ms"], d[k]["c_alloc_ms"], d[k]["c_transfer_ms"]) for k in ("first", "second", "third")))' 2>&1)"
  done
done

size=$(( $(stat -c %s "$ckpt") / 16777216 * 16777216 ))
b=$("$BUILD/bin/gdunlock" bench -f "$ckpt" -s "$size" --paths host,h2d --rounds 3 --no-verify --json 2>&1)
printf '{"bench": %s}\n' "${b:-null}" >>"$res"
echo "INFO first-load-ceiling: $(printf '%s' "$b" | "$py" -c 'import json,sys; d=json.load(sys.stdin); print(", ".join("%s %.2f GB/s" % (r["path"], r["gbps"]) for r in d["paths"]))' 2>&1)"
