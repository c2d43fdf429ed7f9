#!/usr/bin/env bash
# The vLLM load format and the SGLang loader class against vLLM's and
# SGLang's own classes (tests/python/test_serving.py), in a venv of their
# own: CI has neither package (they are large), so there those tests skip.
#
#   scripts/test-serving.sh            # makes the venv when missing, then tests
#   GDU_SERVING_VENV=DIR scripts/test-serving.sh
#
# vLLM and SGLang pin CUDA builds of torch (several GB). Here they come
# without their dependencies (--no-deps) over a CPU torch, with only the
# packages their loader modules import: the tests read on device "cpu".
# PyPI's torchvision (which SGLang and transformers import) is a CUDA build
# whose operators do not load under a CPU torch; the test declares the one
# operator its import needs (test_serving.py, _cpu_torchvision).
# Needs the network (PyPI) the first time, and the loader library in
# $BUILD/lib (built here when missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${GDU_SERVING_VENV:-$root/build-serving/venv}
BUILD=${BUILD:-$root/build}

# Versions tested together: transformers 5.19.0 is the one SGLang 0.5.23
# pins (vLLM 0.33.0 takes >=5.16.1,<5.21); torchvision 0.28 goes with torch 2.13.
torch=torch==2.13.0 transformers=transformers==5.19.0
engines="vllm==0.33.0 sglang==0.5.23 torchvision==0.28.0 xgrammar"
# What `import vllm.model_executor.model_loader` and `import
# sglang.srt.model_loader.loader` need beyond those (found by importing
# until nothing was missing).
imports="triton psutil pyzmq cbor2 aiohttp requests openai-harmony openai pillow pybase64
cachetools msgspec cloudpickle uvloop py-cpuinfo prometheus_client fastapi
partial_json_parser llguidance einops apache-tvm-ffi orjson IPython dill
sentencepiece compressed_tensors gguf safetensors tqdm"
stamp="$venv/.gdunlock-serving"

# pip's list of what the engines require and did not get is expected here:
# it goes to the log, shown when an install fails.
pip_logged() {
  "$venv/bin/pip" "$@" >>"$venv/install.log" 2>&1 ||
    { tail -20 "$venv/install.log"; echo "FAIL pip $*: $venv/install.log"; exit 1; }
}

if [ "$(cat "$stamp" 2>/dev/null)" != "$torch $transformers $engines $imports" ]; then
  start=$(date +%s)
  python3 -m venv "$venv"
  pip=(pip_logged install -q --disable-pip-version-check)
  constraints=$(mktemp)
  trap 'rm -f "$constraints"' EXIT
  printf '%s\n' "$torch" "$transformers" >"$constraints"
  "${pip[@]}" "$torch"
  # shellcheck disable=SC2086
  "${pip[@]}" --no-deps $engines
  # shellcheck disable=SC2086
  "${pip[@]}" -c "$constraints" "$transformers" $imports
  echo "$torch $transformers $engines $imports" >"$stamp"
  echo "venv $venv made in $(($(date +%s) - start)) s"
fi
"$venv/bin/python" -c 'from importlib.metadata import version
print(", ".join(f"{p} {version(p)}" for p in ("torch", "vllm", "sglang", "transformers")))'

if [ ! -e "$BUILD/lib/libgdunlock-load.so.0" ]; then
  cmake -S "$root" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j2 --target gdu_safetensors_shared >/dev/null
fi
cd "$root"
BUILD="$BUILD" GDU_REQUIRE_SERVING=1 PYTHONDONTWRITEBYTECODE=1 \
  "$venv/bin/python" -m unittest -v tests/python/test_serving.py
