#!/usr/bin/env bash
# The vLLM load format and the SGLang plugin and loader class against vLLM's
# and SGLang's own classes (tests/python/test_serving.py), each pair of
# releases in a venv of its own: the newest releases, and the pinned pair
# (the one the loaders were written against).
#
#   scripts/test-serving.sh                 # both pairs: makes a venv when missing, then tests
#   scripts/test-serving.sh newest|pinned   # one pair
#   GDU_SERVING_VENVS=DIR scripts/test-serving.sh   # the venvs under DIR/PAIR
#
# vLLM and SGLang pin CUDA builds of torch (several GB). Here they come
# without their dependencies (--no-deps) over a CPU torch, with only the
# packages their loader modules import: the tests read on device "cpu".
# PyPI's torchvision (which SGLang and transformers import) is a CUDA build
# whose operators do not load under a CPU torch; the test declares the one
# operator its import needs (test_serving.py, _cpu_torchvision).
# Needs the network (PyPI) the first time, and the loader library in
# $BUILD/lib (built here when missing). A venv takes about 3 GB.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venvs=${GDU_SERVING_VENVS:-$root/build-serving}
BUILD=${BUILD:-$root/build}

# The pairs. newest: the latest vLLM and SGLang on PyPI when this was
# written (the script says when a later one is out); pinned: the pair the
# loaders were first written against. transformers 5.19.0 is the one SGLang
# 0.5.23 pins (vLLM 0.33.0 takes >=5.16.1,<5.21; 0.34.0 takes it too);
# torchvision 0.28 goes with torch 2.13 (vLLM 0.34.0 asks for torch 2.14,
# whose CPU build is not at hand: the loader modules import under 2.13).
declare -A pairs=(
  [newest]="vllm==0.34.0 sglang==0.5.23"
  [pinned]="vllm==0.33.0 sglang==0.5.23"
)
torch=torch==2.13.0 transformers=transformers==5.19.0
# What `import vllm.model_executor.model_loader` and `import
# sglang.srt.model_loader.loader` need beyond those (found by importing
# until nothing was missing).
imports="triton psutil pyzmq cbor2 aiohttp requests openai-harmony openai pillow pybase64
cachetools msgspec cloudpickle uvloop py-cpuinfo prometheus_client fastapi
partial_json_parser llguidance einops apache-tvm-ffi orjson IPython dill
sentencepiece compressed_tensors gguf safetensors tqdm"

case ${1:-all} in
  all) wanted="newest pinned" ;;
  newest | pinned) wanted=$1 ;;
  *) echo "usage: scripts/test-serving.sh [newest|pinned]" >&2; exit 64 ;;
esac

# The latest release of a package on PyPI, or nothing when it cannot be asked.
latest() {
  python3 -m pip index versions "$1" 2>/dev/null | sed -n "s/^$1 (\(.*\))$/\1/p"
}

if [ ! -e "$BUILD/lib/libgdunlock-load.so.0" ]; then
  cmake -S "$root" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j2 --target gdu_safetensors_shared >/dev/null
fi

# pip's list of what the engines require and did not get is expected here:
# it goes to the log, shown when an install fails.
pip_logged() {
  local venv=$1
  shift
  "$venv/bin/pip" "$@" >>"$venv/install.log" 2>&1 ||
    { tail -20 "$venv/install.log"; echo "FAIL pip $*: $venv/install.log"; exit 1; }
}

# Makes the venv of a pair when missing (or made for other versions), then
# runs the tests in it.
test_pair() {
  local venv=$venvs/$1
  local engines="${pairs[$1]} torchvision==0.28.0 xgrammar"
  local stamp="$venv/.gdunlock-serving"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$torch $transformers $engines $imports" ]; then
    local start pip=(pip_logged "$venv" install -q --disable-pip-version-check)
    start=$(date +%s)
    python3 -m venv "$venv"
    printf '%s\n' "$torch" "$transformers" >"$venv/constraints.txt"
    "${pip[@]}" "$torch"
    # shellcheck disable=SC2086
    "${pip[@]}" --no-deps $engines
    # shellcheck disable=SC2086
    "${pip[@]}" -c "$venv/constraints.txt" "$transformers" $imports
    echo "$torch $transformers $engines $imports" >"$stamp"
    echo "venv $venv made in $(($(date +%s) - start)) s"
  fi
  "$venv/bin/python" -c 'from importlib.metadata import version
print(", ".join(f"{p} {version(p)}" for p in ("torch", "vllm", "sglang", "transformers")))'
  (cd "$root" && BUILD="$BUILD" GDU_REQUIRE_SERVING=1 PYTHONDONTWRITEBYTECODE=1 \
    "$venv/bin/python" -m unittest -v tests/python/test_serving.py)
}

if [[ $wanted == *newest* ]]; then
  for p in vllm sglang; do
    out=$(latest "$p")
    pinned=$(tr ' ' '\n' <<<"${pairs[newest]}" | sed -n "s/^$p==//p")
    [ -z "$out" ] || [ "$out" = "$pinned" ] ||
      echo "note: $p $out is on PyPI; the newest pair here has $pinned (update pairs[newest])"
  done
fi
for pair in $wanted; do
  echo "== $pair: ${pairs[$pair]}"
  test_pair "$pair"
done
