#!/usr/bin/env bash
# Every command's --json document on a real GPU against the schemas of
# docs/cli-json.md and docs/doctor-json.md (tests/cli/json_check.py): the
# members only a GPU brings (p2p's RM caps and routes, verify's nvidia-fs
# deltas and shim report, bench's GPU rows, run's process reports) must be
# documented too. Small sizes: seconds. Prints PASS/FAIL/SKIP lines; the
# documents are kept in $OUT/cli_json.
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
ROOT=${GDU_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
GDU="$BUILD/bin/gdunlock"
D="$OUT/cli_json"
mkdir -p "$D"
if [ ! -x "$GDU" ]; then
  echo "FAIL cli-json-binary: $GDU missing (build first)"
  exit 0
fi
if ! command -v nvidia-smi >/dev/null; then
  echo "SKIP cli-json: nvidia-smi not found (no NVIDIA driver here)"
  exit 0
fi
scratch=$(mktemp -d "${TMPDIR:-/var/tmp}/gdu-cli-json-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# doc COMMAND ARGS...: gdunlock COMMAND --json ARGS: with a GPU here, the
# command's report (any exit status it documents), every member documented.
doc() {
  local command=$1 name=$1 why
  shift
  timeout 120 "$GDU" "$command" --json "$@" >"$D/$name.json" 2>"$D/$name.err"
  local rc=$?
  local schema
  if ! why=$(python3 "$ROOT/tests/cli/json_check.py" "$ROOT/docs" "$D/$name.json" $rc "$command" 2>&1); then
    echo "FAIL cli-json-$name: exit $rc: $why ($(head -c 200 "$D/$name.err"))"
  elif schema=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["schema"]); sys.exit(d["schema"] == "gdunlock-error/1")' "$D/$name.json"); then
    echo "PASS cli-json-$name: exit $rc, $schema, every member documented"
  else
    echo "FAIL cli-json-$name: exit $rc, the error document, not a report: $(head -c 300 "$D/$name.json" | tr '\n' ' ')"
  fi
}

doc doctor "$scratch"
doc topo
doc p2p --size 4M --iters 2
doc verify "$scratch/verify.bin" --size 4M
doc bench -f "$scratch/bench.dat" --create -s 64M -i 4M --rounds 1
# gdsio's -x 2 (storage -> CPU memory -> GPU): the engine and naive rows, run.
doc bench -f "$scratch/bench.dat" -s 64M -i 4M --rounds 1 -x 2
rows=$(python3 -c 'import json,sys; print(" ".join(p["path"] + ("" if p["ran"] else "(not run)") for p in json.load(open(sys.argv[1]))["paths"]))' "$D/bench.json" 2>&1)
if [ "$rows" = "engine naive" ]; then
  echo "PASS cli-bench-x2: -x 2 ran the rows '$rows'"
else
  echo "FAIL cli-bench-x2: -x 2 gave the rows '$rows', expected 'engine naive'"
fi
printf '\x37\x00\x00\x00\x00\x00\x00\x00{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}  ab' >"$scratch/tiny.safetensors"
doc load "$scratch/tiny.safetensors" --gpu 0 --verify --list
if [ -x "$BUILD/bin/shim_gpu_buffers" ]; then
  doc run --test-drop-native -- "$BUILD/bin/shim_gpu_buffers" 0
else
  echo "SKIP cli-json-run: $BUILD/bin/shim_gpu_buffers not built (a GPU program for the shim's report)"
fi
exit 0
