#!/usr/bin/env bash
# check_wheel.sh SOURCE BUILD PYTHON: `pip wheel` of the repository (the
# build `pip install .` runs, offline: --no-build-isolation --no-index) gives
# a platform wheel that holds the command, the shim, the loader library and
# the system libraries they load; installed into a fresh venv it works away
# from the source tree: `gdunlock --version`, `gdunlock run` preloading the
# installed shim, a load on "cpu" through `import gdunlock` with the bytes of
# the file. A build that cannot run (no jansson here) fails, naming the
# package to install, and leaves no wheel.
# The CMake build folder is kept in BUILD/wheel-build (flock'ed: ctest may run
# twice at once), so only the first run compiles; the venv is new every time.
set -euo pipefail
src=$(realpath "$1")
build=$(realpath "$2")
python=$3
top=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock-wheel-XXXXXX")
trap 'rm -rf "$top"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_NO_CACHE_DIR=1
unset BUILD GDUNLOCK_LOAD_LIB PYTHONPATH LD_LIBRARY_PATH LD_PRELOAD

"$python" -c 'import scikit_build_core' 2>/dev/null ||
  fail "$python has no scikit-build-core, the package's build backend (pip install 'scikit-build-core>=0.11'; .ci/run does)"
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$src/python/gdunlock/_version.py")

wheel() { # wheel OUT BUILD_DIR [env...]: pip wheel of the tree, offline
  local out=$1 dir=$2
  shift 2
  env "$@" "$python" -m pip wheel --no-build-isolation --no-index --no-deps -w "$out" \
    --config-settings=build-dir="$dir" "$src"
}
(flock 9 && wheel "$top/dist" "$build/wheel-build") 9>"$build/wheel-build.lock" >"$top/wheel.log" 2>&1 ||
  fail "pip wheel: $(tail -20 "$top/wheel.log")"
whl=$(ls "$top"/dist/*.whl)
[ "$(basename "$whl")" = "gdunlock-$version-py3-none-linux_$(uname -m).whl" ] || fail "wheel named $(basename "$whl")"
wheel_problems() {
  "$python" - "$1" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = {"gdunlock/_native/bin/gdunlock", "gdunlock/_native/lib/libgdunlock.so",
        "gdunlock/_native/lib/libgdunlock-load.so.0", "gdunlock/_native/lib/libjansson.so.4",
        "gdunlock/_native/lib/libpci.so.3", "gdunlock/_native/lib/liburing.so.2",
        "gdunlock/_native/licenses/libpci3.copyright", "gdunlock/__init__.py",
        "gdunlock/_command.py"}
meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
problems = [f"missing {n}" for n in sorted(need - names)]
if "License-Expression: Apache-2.0" not in zipfile.ZipFile(sys.argv[1]).read(meta).decode():
    problems.append("no License-Expression: Apache-2.0 in METADATA")
if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
    problems.append("no LICENSE in .dist-info/licenses")
print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
}
problems=$(wheel_problems "$whl") || fail "the wheel: $problems"

# A fresh venv; pip (the outer one) installs the wheel and its `gdunlock` entry.
"$python" -m venv --without-pip "$top/venv"
"$python" -m pip --python "$top/venv/bin/python" install -q --no-index --no-deps "$whl" \
  >"$top/install.log" 2>&1 || fail "pip install: $(tail -5 "$top/install.log")"
site=$("$top/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
native=$(realpath "$site/gdunlock/_native")
cd "$top" # away from the source tree

out=$("$top/venv/bin/gdunlock" --version) || fail "gdunlock --version exited $?"
[ "$out" = "gdunlock $version" ] || fail "gdunlock --version printed '$out'"
out=$("$top/venv/bin/gdunlock" run -- sh -c 'echo $LD_PRELOAD' 2>"$top/run.err") || fail "gdunlock run exited $?: $(cat "$top/run.err")"
[ "$(realpath "$out")" = "$native/lib/libgdunlock.so" ] || fail "gdunlock run preloaded '$out', not $native/lib/libgdunlock.so"
! grep -q "cannot be preloaded" "$top/run.err" || fail "the shim could not be preloaded: $(cat "$top/run.err")"
readelf -d "$native/lib/libgdunlock.so" | grep -q 'Library soname: \[libgdunlock.so.0\]' || fail "the wheel's shim has no SONAME libgdunlock.so.0"
# Every library the command and the loader load comes from the wheel or glibc.
for elf in "$native/bin/gdunlock" "$native/lib/libgdunlock-load.so.0"; do
  deps=$(ldd "$elf")
  ! grep -q "not found" <<<"$deps" || fail "$elf: $(grep "not found" <<<"$deps")"
  for lib in libjansson libpci liburing; do
    line=$(grep "$lib\.so" <<<"$deps") || continue
    [[ $line == *"=> $native/"* ]] || fail "$elf loads $lib from outside the wheel: $line"
  done
done

"$top/venv/bin/python" - "$src/tests/fixtures/safetensors/small.safetensors" "$native" <<'PY' || fail "a load on cpu through import gdunlock"
import json, os, struct, sys
import gdunlock
path, native = sys.argv[1], sys.argv[2]
assert os.path.realpath(gdunlock.library_path()) == os.path.join(native, "lib", "libgdunlock-load.so.0"), gdunlock.library_path()
data = open(path, "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = {k: v for k, v in json.loads(data[8:8 + n]).items() if k != "__metadata__"}
with gdunlock.Checkpoint(path) as c:
    c.load("cpu")
    got = {t.name: c.host_bytes(i) for i, t in enumerate(c.tensors())}
want = {k: data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in header.items()}
assert got == want, sorted(k for k in want if got.get(k) != want[k])
print(f"loaded {len(got)} tensors on cpu, bytes identical")
PY

# A build that cannot run stops pip with the reason, and there is no wheel.
if wheel "$top/bad" "$top/bad-build" PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH= >"$top/bad.log" 2>&1; then
  fail "pip wheel succeeded without jansson"
fi
grep -q "libjansson-dev" "$top/bad.log" || fail "the failed build does not name the package to install: $(tail -5 "$top/bad.log")"
[ -z "$(ls "$top/bad" 2>/dev/null)" ] || fail "a failed build left $(ls "$top/bad")"
echo "PASS: gdunlock-$version wheel installed into a fresh venv: --version, run preloads $native/lib/libgdunlock.so, a cpu load; without jansson pip fails naming libjansson-dev"
