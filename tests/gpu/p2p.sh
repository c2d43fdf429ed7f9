#!/usr/bin/env bash
# GPU checks of `gdunlock p2p` (run by tests/gpu/run.sh on the accelerator
# machine from a carried build folder):
#   - --help, and the capability view alone (--no-bench --json);
#   - one GPU: the "no pair" message, exit 0, the diagonal measured: copy
#     engine, SM write/read kernels, pointer chase, each route's pattern check
#     (p2p_check.py); SKIP the pairs;
#   - two GPUs: a full run (JSON and table into $OUT/p2p/), the RM's P2P caps
#     against CUDA's answer and nvidia-smi topo, copied data verified, P2P
#     enabled vs disabled bandwidth and latency, our enabled bandwidth within
#     5 % of PyTorch's own peer tensor copy (p2p_torch.py) in the same run, and
#     the SM matrices and route checks of every pair;
#   - the userspace BAR1 window study (p2p_window): steps 1 and 2 on one GPU,
#     step 3 on two (SKIP with one, or when step 2 is refused);
#   - NCCL all-reduce through torch.distributed, sums compared exactly
#     (p2p_nccl.py): one rank on one GPU, two ranks (and the NCCL_P2P_DISABLE=1
#     control) on two.
# Leaves $OUT/p2p/result.md (command, date, machine, numbers) for bench/results/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${GDU_ROOT:-$(cd "$here/../.." && pwd)}
build=${BUILD:-$root/build}
out=${OUT:-/tmp/gdu-gpu-out}/p2p
mkdir -p "$out"
bin=$build/bin/gdunlock
size=${GDU_P2P_SIZE:-256M}
iters=${GDU_P2P_ITERS:-5}

if [ ! -x "$bin" ]; then
  echo "FAIL p2p-binary: $bin missing (build first or set BUILD)"
  exit 0
fi
if "$bin" p2p --help >"$out/help.txt" 2>&1 && grep -q -- "--gpus LIST" "$out/help.txt"; then
  echo "PASS p2p-help: usage printed, exit 0"
else
  echo "FAIL p2p-help: see $out/help.txt"
fi

"$bin" p2p --no-bench --json >"$out/caps.json" 2>"$out/caps.err"
rc=$?
if [ $rc -eq 69 ]; then
  echo "SKIP p2p: no GPU here ($(head -1 "$out/caps.err"))"
  exit 0
fi
ngpu=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["gpus"]))' "$out/caps.json" 2>/dev/null || echo 0)
if [ $rc -ne 0 ] || [ "$ngpu" -lt 1 ]; then
  echo "FAIL p2p-caps: exit $rc, $(head -3 "$out/caps.err" | tr '\n' ' ')"
  exit 0
fi
echo "PASS p2p-caps: exit 0, $ngpu GPU(s) described"

# The BAR1 window study and the NCCL check, for both machine sizes; then result.md.
window_and_nccl() {
  "$build/bin/p2p_window" --out "$out/window.json" >"$out/window.txt" 2>"$out/window.err"
  rc=$?
  cat "$out/window.txt"
  [ $rc -eq 0 ] || echo "FAIL p2p-window: exit $rc: $(tail -2 "$out/window.err" | tr '\n' ' ')"
  timeout 300 python3 "$here/p2p_nccl.py" --timeout 120 --out "$out/nccl.json" \
    >"$out/nccl.txt" 2>"$out/nccl.err"
  rc=$?
  cat "$out/nccl.txt"
  [ $rc -eq 0 ] || echo "FAIL p2p-nccl: exit $rc: $(tail -2 "$out/nccl.err" | tr '\n' ' ')"
  if [ "$ngpu" -ge 2 ]; then
    NCCL_P2P_DISABLE=1 timeout 300 python3 "$here/p2p_nccl.py" --timeout 120 --label p2p-disabled \
      --out "$out/nccl-p2p-disabled.json" >"$out/nccl-p2p-disabled.txt" 2>"$out/nccl-p2p-disabled.err"
    cat "$out/nccl-p2p-disabled.txt"
  fi
}

# result.md: command, date, machine, the table, every check line.
result_md() {
  local cmd=$1 start=$2 table=$3 checks=$4
  {
    echo "# gdunlock p2p on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"
    echo
    echo "- command: \`$cmd\` (and \`--json\`), \`build/bin/p2p_window --out window.json\`, \`python3 tests/gpu/p2p_nccl.py\`"
    echo "- date: $start"
    echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
    echo "- user: $(id -un) (CAP_SYS_ADMIN matters to step 2 of the window study)"
    echo
    echo '```'
    cat "$table"
    echo '```'
    echo
    echo '```'
    cat "$checks" "$out/window.txt" "$out/nccl.txt" 2>/dev/null
    [ -f "$out/nccl-p2p-disabled.txt" ] && cat "$out/nccl-p2p-disabled.txt"
    echo '```'
    echo
    echo "BAR1 window record (\`p2p_window --out\`):"
    echo
    echo '```json'
    cat "$out/window.json" 2>/dev/null
    echo '```'
  } >"$out/result.md"
}

if [ "$ngpu" -eq 1 ]; then
  cmd="gdunlock p2p --size 64M --iters 3"
  start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  "$bin" p2p --size 64M --iters 3 >"$out/one-gpu.txt" 2>"$out/one-gpu.err"
  rc=$?
  if [ $rc -eq 0 ] && grep -q "Only one GPU: there is no pair" "$out/one-gpu.txt"; then
    echo "PASS p2p-one-gpu: says there is no pair, exit 0, copy within GPU 0 $(grep -A2 'Unidirectional P2P=Enabled' "$out/one-gpu.txt" | tail -1 | awk '{print $2}') GB/s"
  else
    echo "FAIL p2p-one-gpu: exit $rc; see $out/one-gpu.txt"
  fi
  "$bin" p2p --size 64M --iters 3 --json >"$out/one-gpu.json" 2>"$out/one-gpu-json.err"
  rc=$?
  [ $rc -eq 0 ] && echo "PASS p2p-one-gpu-json: $cmd --json exit 0" \
                || echo "FAIL p2p-one-gpu-json: exit $rc: $(tail -2 "$out/one-gpu-json.err" | tr '\n' ' ')"
  python3 "$here/p2p_check.py" "$out/one-gpu.json" | tee "$out/checks.txt"
  window_and_nccl
  result_md "$cmd" "$start" "$out/one-gpu.txt" "$out/checks.txt"
  exit 0
fi

cmd="gdunlock p2p --gpus 0,1 --size $size --iters $iters"
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
"$bin" p2p --gpus 0,1 --size "$size" --iters "$iters" --json --progress >"$out/p2p.json" 2>"$out/p2p.err"
rc=$?
[ $rc -eq 0 ] && echo "PASS p2p-run: $cmd --json exit 0" || echo "FAIL p2p-run: exit $rc: $(tail -2 "$out/p2p.err" | tr '\n' ' ')"
"$bin" p2p --gpus 0,1 --size "$size" --iters "$iters" >"$out/p2p.txt" 2>"$out/p2p-table.err"
echo "$([ $? -eq 0 ] && echo PASS || echo FAIL) p2p-table: human tables in $out/p2p.txt"

bytes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["size_bytes"])' "$out/p2p.json" 2>/dev/null || echo $((256 << 20)))
torch_json=-
if python3 "$here/p2p_torch.py" --size "$bytes" --iters "$iters" --out "$out/torch.json" >"$out/torch.log" 2>&1; then
  torch_json=$out/torch.json
else
  echo "SKIP p2p-torch: $(tail -1 "$out/torch.log")"
fi
nvidia-smi topo -m >"$out/topo.txt" 2>&1 || : >"$out/topo.txt"
python3 "$here/p2p_check.py" "$out/p2p.json" "$torch_json" "$out/topo.txt" | tee "$out/checks.txt"
window_and_nccl
result_md "$cmd; python3 tests/gpu/p2p_torch.py --size $bytes --iters $iters" "$start" \
  "$out/p2p.txt" "$out/checks.txt"
exit 0
