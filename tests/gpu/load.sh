#!/usr/bin/env bash
# GPU checks of `gdunlock load` and its Python API (run by tests/gpu/run.sh
# on the accelerator machine), one PASS/FAIL/SKIP line each:
#   1. load_make_checkpoint.py: a >= 8 GiB LLM-like checkpoint (safetensors
#      library) in $GDU_LOAD_DIR (default /var/tmp/gdu-load: a disk);
#   2. load_bench.py: safetensors.torch.load_file vs gdunlock (Python, CLI)
#      vs the engine's raw read, torch.equal on every tensor, memory release,
#      2 GPUs when present, device="cpu";
#   3. load_compare.py: every loader (gdunlock load_safetensors, safe_open
#      all keys, weights_iterator, CLI; safetensors; fastsafetensors nogds
#      and GDS when built) in a fresh process each, alternating rounds, with
#      `gdunlock bench` host and h2d rows as the ceiling;
#   4. load_api.py: transformers from_pretrained with and without
#      gdunlock.patch(), every dtype against safetensors' safe_open,
#      tensor-parallel slices, weights_iterator;
#   5. load-ring: cuFile in compat mode through the ring of registered
#      buffers with GDUNLOCK_TEST_BAR1=256M (a simulated small BAR1), on a
#      shard larger than that BAR1, verified byte for byte.
# cuFile compat mode needs udev's data for the block device under the files
# (CU_FILE_HANDLE_NOT_REGISTERED, 5027, otherwise): when
# /run/udev/data/bMAJ:MIN is missing this script writes one
# (E:ID_FS_USAGE=filesystem, E:ID_FS_TYPE, E:ID_FS_UUID) and removes it at
# exit; it says so. fastsafetensors: $GDU_FASTSAFETENSORS (a `pip install
# --target` folder), default carry/fastsafetensors-build, built there from
# carry/fastsafetensors when only the source is present. Results go to
# $OUT/load_*.{json,md}, logs to $OUT/load_*.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${GDU_ROOT:-$(cd "$here/../.." && pwd)}
export BUILD=${BUILD:-$root/build}
OUT=${OUT:-/tmp/gdu-gpu-out}
work=${GDU_LOAD_DIR:-/var/tmp/gdu-load}
py=${PYTHON:-python3}
mkdir -p "$OUT"
start=$(date +%s)

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
mkdir -p "$work"

# udev's entry for the file system under $work, for cuFile compat mode.
udev_made=""
cleanup() { [ -n "$udev_made" ] && rm -f "$udev_made" && echo "# removed the udev entry $udev_made"; }
trap cleanup EXIT
udev_entry() {
  local majmin fstype uuid f
  majmin=$(findmnt -no MAJ:MIN -T "$work" 2>/dev/null | head -1 | tr -d ' ')
  fstype=$(findmnt -no FSTYPE -T "$work" 2>/dev/null | head -1)
  uuid=$(findmnt -no UUID -T "$work" 2>/dev/null | head -1)
  [ -n "$uuid" ] || uuid=$(blkid -s UUID -o value "$(findmnt -no SOURCE -T "$work" | head -1)" 2>/dev/null)
  case "$majmin" in ''|0:*) echo "# no block device under $work ($fstype): cuFile cannot use it"; return 1 ;; esac
  f=/run/udev/data/b$majmin
  if [ -e "$f" ]; then
    echo "# udev entry $f exists: left as it is"
    return 0
  fi
  if mkdir -p /run/udev/data 2>/dev/null &&
     { printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$fstype"
       [ -z "$uuid" ] || printf 'E:ID_FS_UUID=%s\n' "$uuid"; } >"$f" 2>/dev/null; then
    udev_made=$f
    echo "# wrote the udev entry $f (ID_FS_USAGE=filesystem, ID_FS_TYPE=$fstype, ID_FS_UUID=${uuid:-unknown, left out}) for cuFile compat mode; removed at exit"
    return 0
  fi
  echo "# cannot write $f (not root?): cuFile will refuse files with 5027"
  return 1
}
udev_ok=0
udev_entry && udev_ok=1

# 1. The checkpoint (reused when its parameters match).
if ! "$py" "$here/load_make_checkpoint.py" --dir "$work" --gib 8 >"$OUT/load_make.log" 2>&1; then
  echo "FAIL load-checkpoint: could not create it: $(tail -1 "$OUT/load_make.log")"
  exit 0
fi
echo "# $(tail -1 "$OUT/load_make.log") ($(( $(date +%s) - start )) s)"
ckpt=$work/model.safetensors

# GDU_LOAD_STEPS="bench compare api ring" (the default) picks the steps after 1.
steps=" ${GDU_LOAD_STEPS:-bench compare api ring} "
step() { [[ "$steps" == *" $1 "* ]]; }

# 2. The loader against safetensors and the raw engine, one process.
t=$(date +%s)
step bench && "$py" "$here/load_bench.py" --dir "$work" --gdunlock "$BUILD/bin/gdunlock" --out "$OUT" \
  --repeat 3 2>"$OUT/load_bench.log"
echo "# load_bench.py took $(( $(date +%s) - t )) s"

# 3. Every loader in a fresh process, alternating rounds, and the ceiling.
fst=${GDU_FASTSAFETENSORS:-$root/carry/fastsafetensors-build}
if [ ! -d "$fst" ] && [ -d "$root/carry/fastsafetensors" ]; then
  t=$(date +%s)
  if "$py" -m pip install --no-build-isolation --no-deps --no-index --target "$fst" \
       "$root/carry/fastsafetensors" >"$OUT/load_fastsafetensors_build.log" 2>&1; then
    echo "# built fastsafetensors into $fst ($(( $(date +%s) - t )) s, not counted below)"
  else
    echo "# fastsafetensors did not build: $(tail -1 "$OUT/load_fastsafetensors_build.log")"
    rm -rf "$fst"
  fi
fi
t=$(date +%s)
if step compare && ! "$py" "$here/load_compare.py" --path "$ckpt" --gdunlock "$BUILD/bin/gdunlock" \
  --out "$OUT" --rounds "${GDU_LOAD_ROUNDS:-3}" --fastsafetensors "$fst" 2>"$OUT/load_compare.log"; then
  echo "FAIL load-compare: load_compare.py failed ($(tail -1 "$OUT/load_compare.log"))"
fi
echo "# load_compare.py took $(( $(date +%s) - t )) s"

# 4. The ecosystem API.
t=$(date +%s)
if step api && ! "$py" "$here/load_api.py" --dir "$work/api" --out "$OUT" 2>"$OUT/load_api.log"; then
  echo "FAIL load-api: load_api.py failed ($(tail -1 "$OUT/load_api.log"))"
fi
echo "# load_api.py took $(( $(date +%s) - t )) s"

# 5. The cuFile ring under a simulated 256 MiB BAR1, in compat mode.
shard=$(ls "$work"/sharded/model-0000*.safetensors 2>/dev/null | head -1)
if ! step ring; then
  :
elif [ "$udev_ok" != 1 ]; then
  echo "SKIP load-ring: no udev entry for the file system under $work (cuFile compat mode refuses it)"
elif [ -z "$shard" ]; then
  echo "FAIL load-ring: no shard in $work/sharded"
else
  # 64 MiB chunks: the 220 MiB budget holds 3 buffers, fewer than the workers.
  GDUNLOCK_IO_BACKEND=cufile GDUNLOCK_TEST_BAR1=256M GDUNLOCK_IO_CHUNK=64M \
    "$BUILD/bin/gdunlock" load "$shard" --verify --json >"$OUT/load_ring.json" 2>"$OUT/load_ring.log"
  rc=$?
  "$py" - "$OUT/load_ring.json" "$rc" "$shard" <<'PY'
import json, os, re, sys
path, rc, shard = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    d = json.load(open(path))
except ValueError:
    print(f"FAIL load-ring: exit {rc}, no JSON ({open(path.replace('.json', '.log')).read()[-300:]})")
    sys.exit(0)
if "error" in d:
    msg = d["error"].get("message", "")
    missing = "cufile unavailable" in msg and ("libcufile" in msg or "not found" in msg)
    print(f"{'SKIP' if missing else 'FAIL'} load-ring: exit {rc}: {d['error'].get('code')}: {msg}")
    sys.exit(0)
reason, size = d.get("reason", ""), d.get("tensor_bytes", 0)
m = re.search(r"ring of (\d+) x (\d+) KiB registered buffers \((\d+) MiB of a (\d+) MiB BAR1 budget",
              reason)
ring_ok = m is not None and int(m.group(4)) == 220 and int(m.group(3)) <= 220 and \
    int(m.group(1)) * int(m.group(2)) // 1024 == int(m.group(3))
ok = (rc == 0 and (d.get("verify") or {}).get("ok") is True and
      d.get("backend", "").startswith("cufile") and ring_ok and size > 256 << 20)
print(f"{'PASS' if ok else 'FAIL'} load-ring: GDUNLOCK_IO_BACKEND=cufile GDUNLOCK_TEST_BAR1=256M "
      f"GDUNLOCK_IO_CHUNK=64M gdunlock load --verify of {size / (1 << 20):.0f} MiB "
      f"({os.path.basename(shard)}): exit {rc}, verify {(d.get('verify') or {}).get('message')}, "
      f"{d.get('gbps', 0):.2f} GB/s, path: {reason}")
PY
fi
echo "# load checks took $(( $(date +%s) - start )) s; results in $OUT/load_results.md, load_compare.md"
[ "${GDU_LOAD_KEEP:-0}" = 1 ] || rm -rf "$work"
exit 0
