#!/usr/bin/env bash
# GPU checks of the pip package (issue 23, item 2): the wheel built on the
# development machine and carried in the build folder,
#   python3 -m pip wheel --no-build-isolation --no-index --no-deps -w build/dist .
# installed with this machine's pip into a fresh folder (another
# distribution than the one it was built on) and used as a user would:
#   wheel-version  the installed `gdunlock` runs here, its libraries all found
#   wheel-run      `gdunlock run` preloads the wheel's shim into a PyTorch
#                  program; in the GeForce state (--test-drop-native) the shim
#                  makes its own ThirdPartyP2P object and registers the memory
#   wheel-load     `import gdunlock` (the wheel's library) loads a checkpoint
#                  into GPU 0, every tensor equal to safetensors' own load
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
O="$OUT/wheel"
rm -rf "$O"
mkdir -p "$O"
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "SKIP $1: $2"; }
py=${PYTHON:-python3}
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  skip wheel "no NVIDIA GPU here"
  exit 0
fi
whl=$(ls "$BUILD"/dist/gdunlock-*.whl 2>/dev/null | tail -1)
if [ -z "$whl" ]; then
  skip wheel "no wheel in $BUILD/dist (build it before carrying: python3 -m pip wheel --no-build-isolation --no-index --no-deps -w $BUILD/dist .)"
  exit 0
fi
if ! "$py" -c 'import torch, safetensors' 2>/dev/null; then
  skip wheel "$py lacks torch or safetensors"
  exit 0
fi

site="$O/site"
if ! "$py" -m pip install -q --no-deps --no-index --target "$site" "$whl" >"$O/pip.log" 2>&1; then
  fail wheel-version "pip install --target of $(basename "$whl"): $(tail -3 "$O/pip.log")"
  exit 0
fi
gd="$site/bin/gdunlock"
native="$site/gdunlock/_native"
export PYTHONPATH="$site"
cd "$O" || exit 1

want=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "${GDU_ROOT:-.}/python/gdunlock/_version.py")
version=$("$gd" --version 2>&1)
missing=$(ldd "$native/bin/gdunlock" "$native/lib/libgdunlock-load.so.0" | grep "not found")
if [ "$version" = "gdunlock $want" ] && [ -z "$missing" ]; then
  pass wheel-version "$(basename "$whl") installed with $("$py" -m pip --version | cut -d' ' -f1-2): '$version', every library found ($(ldd "$native/bin/gdunlock" | grep -c "=> $native/") from the wheel)"
else
  fail wheel-version "--version printed '$version' (want gdunlock $want); missing: ${missing:-none}"
fi

preload=$("$gd" run -- sh -c 'echo $LD_PRELOAD' 2>/dev/null)
"$gd" run --test-drop-native --report "$O/run.json" -- "$py" -c \
  "import torch; x = torch.ones(64 << 20, dtype=torch.uint8, device='cuda'); torch.cuda.synchronize(); print(int(x.sum()))" \
  >"$O/run.out" 2>"$O/run.err"
rc=$?
summary=$("$py" - "$O/run.json" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
gpus = [g for p in d["processes"] for g in p["gpus"] if g["mode"] != "idle"]
ok = any(g["mode"] == "unlocked" and g["registered"] >= 1 and g["failures"] == 0 for g in gpus)
print(("ok " if ok else "bad ") + "; ".join(
    f"{g.get('pci')}: {g['mode']}, created {g['objects_created']}, registered {g['registered']}, "
    f"failures {g['failures']}" for g in gpus))
PY
)
if [ $rc -eq 0 ] && [ "$(realpath "$preload")" = "$(realpath "$native/lib/libgdunlock.so")" ] &&
  [ "$(cat "$O/run.out")" = $((64 << 20)) ] && [[ $summary == ok* ]]; then
  pass wheel-run "preloads $native/lib/libgdunlock.so; PyTorch 64 MiB on the GPU under --test-drop-native: ${summary#ok }"
else
  fail wheel-run "exit $rc, preloaded '$preload', program printed '$(head -c 200 "$O/run.out")', report: $summary; stderr: $(tail -3 "$O/run.err")"
fi

out=$("$py" - "$O/model.safetensors" "$native" <<'PY' 2>&1
import os, sys
import torch
from safetensors.torch import load_file, save_file
import gdunlock
path, native = sys.argv[1], sys.argv[2]
g = torch.Generator().manual_seed(23)
tensors = {f"layer{i}.weight": torch.randn(512, 1024 + i, generator=g).to(dt)
           for i, dt in enumerate([torch.float32, torch.float16, torch.bfloat16])}
tensors["ids"] = torch.arange(4096, dtype=torch.int64)
tensors["mask"] = torch.randint(-128, 128, (333,), dtype=torch.int8, generator=g)
save_file(tensors, path)
lib = os.path.realpath(gdunlock.library_path())
assert lib == os.path.join(native, "lib", "libgdunlock-load.so.0"), lib
got = gdunlock.load_safetensors(path, device=0)
want = load_file(path, device="cuda:0")
bad = [k for k in want if k not in got or got[k].device != want[k].device or not torch.equal(got[k], want[k])]
assert not bad and set(got) == set(want), bad
print(f"{len(got)} tensors on {got['ids'].device}, equal to safetensors.torch.load_file; library {lib}")
PY
)
if [ $? -eq 0 ]; then
  pass wheel-load "$out"
else
  fail wheel-load "$(echo "$out" | tail -3)"
fi
