#!/usr/bin/env bash
# GPU checks of the shim, libgdunlock.so (run by tests/gpu/run.sh; $BUILD and
# $OUT set). Every program runs in its own process with the shim preloaded
# (LD_PRELOAD) and writes its report at exit; outputs, stderr and reports are
# kept in $OUT/shim/. Checks (issue 2, "How it is shown"):
#   a  native: libcuda's own NV503C present -> mode native, no RM object made;
#      the kernel lookup's model finds libcuda's cuMemAlloc buffers, not VMM
#   k  the model of the kernel's lookup (src/pinmodel) finds every buffer
#      in strict test mode, and the differential check: the registrations RM
#      holds natively and in strict test mode are the same (shim_differential.py)
#   b  test mode (GDUNLOCK_TEST_DROP_NATIVE=1, the GeForce state): the shim
#      makes the NV503C, registers the VA spaces, cuMemAlloc and VMM buffers
#      (each proved through RM by a second REGISTER_VIDMEM answering 0x19),
#      freed buffers unregistered (UNREGISTER answering 0x57), same GPU data
#   b' strict test mode (GDUNLOCK_TEST_DROP_NATIVE=strict): libcuda's NV503C
#      freed at once, its later NV503C calls answered by the shim and never
#      passed to RM, so every registration RM holds is the shim's own: one VA
#      space (the UVM one), 4/4 cuMemAlloc buffers (0 by libcuda), VMM, freed, data, PyTorch,
#      and the 10,000-cycle loop (registered == unregistered + live before)
#   c  PyTorch: same checksum with and without the shim, live tensors registered
#   d  10,000 alloc/free cycles and an 8-thread storm: no error, no growth
#   e  two GPUs: both handled (SKIP with one)
#   f  overhead of cuMemAlloc/cuMemFree, with / without, in one run: <= 1.02;
#      the cost of an ioctl the shim does not watch (shim_ioctl_cost)
#   g  fork after cuInit, exit without freeing, free from another thread,
#      contexts in a loop: same result with and without the shim
#   h  GDUNLOCK=0 turns it off; `gdunlock run` prints the report
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
here=$(cd "$(dirname "$0")" && pwd)
O="$OUT/shim"
mkdir -p "$O"
rm -f "$O"/*-report-*.json
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "SKIP $1: $2"; }

SHIM="$BUILD/lib/libgdunlock.so"
BIN="$BUILD/bin"
if [ ! -f "$SHIM" ] || [ ! -x "$BIN/shim_gpu_buffers" ]; then
  fail shim-built "$SHIM or $BIN/shim_gpu_buffers missing (build targets gdu_shim and the shim_gpu_* programs)"
  exit 0
fi
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  skip shim "no NVIDIA GPU here"
  exit 0
fi
SHIM=$(readlink -f "$SHIM")
{
  echo "driver: $(cat /sys/module/nvidia_uvm/version 2>/dev/null) / $(head -1 /proc/driver/nvidia/version 2>/dev/null)"
  nvidia-smi -L 2>&1
  echo "shim: $(ls -l "$SHIM")"
} >"$O/env.txt"

# shimrun NAME [VAR=value...] CMD...: CMD with the shim preloaded; stdout in
# $O/NAME.out, stderr in $O/NAME.err, report(s) in $O/NAME-report-<pid>.json.
shimrun() {
  local name=$1
  shift
  env LD_PRELOAD="$SHIM" GDUNLOCK_REPORT="$O/$name-report-%p.json" GDUNLOCK_LOG=info "$@" \
    >"$O/$name.out" 2>"$O/$name.err"
}
# plainrun NAME CMD...: the same without the shim.
plainrun() {
  local name=$1
  shift
  env -u LD_PRELOAD "$@" >"$O/$name.out" 2>"$O/$name.err"
}
report_of() { ls -t "$O/$1"-report-*.json 2>/dev/null | head -1; }
# py FILE EXPR: evaluates EXPR with d = FILE's JSON.
py() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# gpus_summary REPORT: "pci:mode(created,registered+already,unregistered,failures) ..."
gpus_summary() {
  py "$1" '" ".join("%s:%s(created %d, registered %d of which by libcuda %d, found registered %d, unregistered %d, failures %d)" % (g.get("pci") or g["rm_device"], g["mode"], g["objects_created"], g["registered"], g["registered_by_libcuda"], g["already_registered"], g["unregistered"], g["failures"]) for g in d["gpus"])'
}
field() { sed -n "s/.*\b$2=\([0-9]*\).*/\1/p" "$1" | head -1; }
tline() { grep "^TOTALS $2" "$O/$1.out" | head -1; }

# ---- a. native ---------------------------------------------------------------
plainrun plain timeout 300 "$BIN/shim_gpu_buffers" 0
prc=$?
shimrun native SHIM_GPU_LEDGER="$O/native-ledger.json" timeout 300 "$BIN/shim_gpu_buffers" 0
rc=$?
rep=$(report_of native)
if [ $rc -ne 0 ] || [ -z "$rep" ]; then
  fail shim-native "exit $rc, report ${rep:-missing}: $(tail -2 "$O/native.out" "$O/native.err" | tr '\n' ' ')"
else
  modes=$(py "$rep" '" ".join(sorted(set(g["mode"] for g in d["gpus"])))')
  created=$(py "$rep" 'sum(g["objects_created"] for g in d["gpus"])')
  calls=$(py "$rep" 'd["rm_calls"]')
  if [ "$created" = 0 ] && [ "$calls" = 0 ] && ! echo "$modes" | grep -q -E 'unlocked|failed'; then
    pass shim-native "modes {$modes}, objects_created 0, shim RM calls 0; $(gpus_summary "$rep")"
  else
    fail shim-native "modes {$modes}, objects_created $created, shim RM calls $calls; $(gpus_summary "$rep")"
  fi
  # pin_check NAME WANT...: the PIN lines of NAME.out are WANT for each buffer named.
  found=$(grep '^PIN 0 cuMemAlloc' "$O/native.out" | grep -c ' found 0 ')
  vmm=$(grep '^PIN 0 VMM-64MiB ' "$O/native.out" | cut -d' ' -f4)
  if [ "$found" = 4 ] && [ "$vmm" = not-registered ]; then
    pass shim-native-lookup "natively nvidia-fs's lookup (model) finds 4/4 cuMemAlloc buffers; the VMM buffer: $vmm (libcuda never registers VMM memory)"
  else
    fail shim-native-lookup "found $found/4 cuMemAlloc, VMM '$vmm': $(grep '^PIN 0' "$O/native.out" | cut -d' ' -f3-5 | tr '\n' ';')"
  fi
  if [ $prc -eq 0 ] && diff <(grep ^SUM "$O/plain.out") <(grep ^SUM "$O/native.out") >/dev/null; then
    pass shim-native-data "GPU data identical with and without the shim ($(grep ^SUM "$O/native.out" | tr '\n' ' '))"
  else
    fail shim-native-data "plain exit $prc; $(grep ^SUM "$O/plain.out") vs $(grep ^SUM "$O/native.out")"
  fi
fi

# ---- b. test mode: the GeForce state --------------------------------------------
shimrun testmode GDUNLOCK_TEST_DROP_NATIVE=1 timeout 300 "$BIN/shim_gpu_buffers" 0
rc=$?
rep=$(report_of testmode)
if [ $rc -ne 0 ] || [ -z "$rep" ]; then
  fail shim-testmode "exit $rc, report ${rep:-missing}: $(tail -3 "$O/testmode.out" "$O/testmode.err" | tr '\n' ' ')"
else
  created=$(py "$rep" 'sum(g["objects_created"] for g in d["gpus"])')
  vas=$(py "$rep" 'sum(g["va_spaces_registered"] for g in d["gpus"])')
  unlocked=$(py "$rep" 'sum(1 for g in d["gpus"] if g["mode"] == "unlocked")')
  failures=$(py "$rep" 'sum(g["failures"] for g in d["gpus"])')
  errs=$(grep -c '^gdunlock: .*\(fail\|error\|refus\|not acting\)' "$O/testmode.err")
  if [ "${created:-0}" -ge 1 ] && [ "${unlocked:-0}" -ge 1 ] && [ "$failures" = 0 ]; then
    pass shim-testmode-created "NV503C objects created $created, GPUs unlocked $unlocked, failures 0; $(gpus_summary "$rep")"
  else
    fail shim-testmode-created "created ${created:-?}, unlocked ${unlocked:-?}, failures ${failures:-?}; $(gpus_summary "$rep"); stderr: $(grep '^gdunlock:' "$O/testmode.err" | head -3 | tr '\n' ' ')"
  fi
  # libcuda registers its VA space on (what is now) the shim's object; the shim adds none (one per object).
  src=$(py "$rep" '",".join(sorted(set(str(g["va_space_source"]) for g in d["gpus"] if g["mode"] == "unlocked")))')
  [ "${vas:-1}" = 0 ] && { [ "$src" = libcuda ] || [ "$src" = uvm ]; } && pass shim-testmode-vaspaces "one VA space per object, libcuda's own (the UVM one: source $src; the shim registered $vas)" \
    || fail shim-testmode-vaspaces "VA spaces registered by the shim: ${vas:-?}, source '$src'"
  bad=$(grep '^BUF 0 cuMemAlloc' "$O/testmode.out" | grep -v -c '^BUF [0-9]* [^ ]* 1 ')
  n=$(grep -c '^BUF 0 cuMemAlloc' "$O/testmode.out")
  [ "$n" -ge 4 ] && [ "$bad" = 0 ] && pass shim-testmode-cumemalloc "$n/$n cuMemAlloc buffers registered: $(grep '^BUF 0 cuMemAlloc' "$O/testmode.out" | cut -d' ' -f3- | tr '\n' ';')" \
    || fail shim-testmode-cumemalloc "$(grep '^BUF 0 cuMemAlloc' "$O/testmode.out" | tr '\n' ';')"
  v=$(grep '^BUF 0 VMM' "$O/testmode.out")
  echo "$v" | grep -q '^BUF 0 VMM-64MiB 1 ' && pass shim-testmode-vmm "VMM buffer registered (libcuda itself never registers VMM memory): ${v#BUF 0 }" \
    || fail shim-testmode-vmm "${v:-no BUF VMM line}"
  bad=$(grep '^FREED' "$O/testmode.out" | grep -v -c '^FREED [0-9]* [^ ]* 0 ')
  n=$(grep -c '^FREED' "$O/testmode.out")
  [ "$n" -ge 5 ] && [ "$bad" = 0 ] && pass shim-testmode-freed "$n/$n freed buffers no longer registered: $(grep '^FREED' "$O/testmode.out" | head -2 | cut -d' ' -f3- | tr '\n' ';')..." \
    || fail shim-testmode-freed "$(grep '^FREED' "$O/testmode.out" | tr '\n' ';')"
  if diff <(grep ^SUM "$O/plain.out") <(grep ^SUM "$O/testmode.out") >/dev/null && [ "$errs" = 0 ]; then
    pass shim-testmode-data "GPU data identical to the run without the shim, no error lines from the shim"
  else
    fail shim-testmode-data "$(grep ^SUM "$O/plain.out") vs $(grep ^SUM "$O/testmode.out"); shim error lines: $errs"
  fi
fi

# ---- b'. strict test mode: no NV503C call of libcuda's reaches RM -----------------
# strict_ok REPORT: true when the report is of strict mode, every GPU that acts
# is unlocked with no failure, and none of its registrations is libcuda's.
strict_ok() {
  [ "$(py "$1" 'd.get("test_strict") and all(g["mode"] in ("unlocked", "idle") and g["failures"] == 0 and g["registered_by_libcuda"] == 0 for g in d["gpus"]) and any(g["mode"] == "unlocked" for g in d["gpus"])')" = True ]
}
strict_summary() {
  py "$1" '" ".join("%s:%s(created %d, VA spaces registered %d, registered %d of which by libcuda %d, libcuda NV503C calls answered by the shim %d, unregistered %d, failures %d)" % (g.get("pci") or g["rm_device"], g["mode"], g["objects_created"], g["va_spaces_registered"], g["registered"], g["registered_by_libcuda"], g["answered_for_libcuda"], g["unregistered"], g["failures"]) for g in d["gpus"])'
}
shimrun strict GDUNLOCK_TEST_DROP_NATIVE=strict SHIM_GPU_LEDGER="$O/strict-ledger.json" timeout 300 "$BIN/shim_gpu_buffers" 0
rc=$?
rep=$(report_of strict)
if [ $rc -ne 0 ] || [ -z "$rep" ]; then
  fail shim-strict "exit $rc, report ${rep:-missing}: $(tail -3 "$O/strict.out" "$O/strict.err" | tr '\n' ' ')"
else
  answered=$(py "$rep" 'sum(g["answered_for_libcuda"] for g in d["gpus"])')
  freed_log=$(grep -c "strict test mode: libcuda's ThirdPartyP2P 0x[0-9a-f]* freed" "$O/strict.err")
  if strict_ok "$rep" && [ "${answered:-0}" -ge 1 ] && [ "$freed_log" -ge 1 ]; then
    pass shim-strict-created "libcuda's NV503C freed ($freed_log), the shim's own made, $answered libcuda NV503C calls answered without RM; $(strict_summary "$rep")"
  else
    fail shim-strict-created "answered ${answered:-?}, freed log lines $freed_log; $(strict_summary "$rep"); stderr: $(grep '^gdunlock:' "$O/strict.err" | head -3 | tr '\n' ' ')"
  fi
  vas=$(py "$rep" 'max(g["va_spaces_registered"] for g in d["gpus"] if g["mode"] == "unlocked")')
  src=$(py "$rep" '",".join(sorted(set(str(g["va_space_source"]) for g in d["gpus"] if g["mode"] == "unlocked")))')
  [ "${vas:-0}" = 1 ] && [ "$src" = uvm ] && pass shim-strict-vaspaces "one VA space per object, registered by the shim: the one registered with UVM (source $src); libcuda's REGISTER_VA_SPACE never reached RM" \
    || fail shim-strict-vaspaces "VA spaces registered by the shim: ${vas:-?} (want 1), source '$src' (want uvm)"
  # k. what nvidia-fs's lookup (the model) finds, buffer by buffer
  found=$(grep -E '^PIN 0 (cuMemAlloc|VMM|piece)' "$O/strict.out" | grep -c ' found 0 ')
  past=$(grep '^PIN 0 past-end-of-64MiB ' "$O/strict.out" | cut -d' ' -f4,5)
  # Past the end of one allocation is past-end, or spans-allocations where the next one is adjacent.
  if [ "$found" = 6 ] && { [ "$past" = "past-end -22" ] || [ "$past" = "spans-allocations -22" ]; }; then
    pass shim-strict-lookup "nvidia-fs's lookup (model) finds 6/6: the 4 cuMemAlloc buffers, the VMM buffer and a piece of one; a range past a buffer's end: $past ($(grep '^PIN 0 past-end' "$O/strict.out" | cut -d' ' -f6- | cut -c1-80)...)"
  else
    fail shim-strict-lookup "found $found/6, past-end '$past': $(grep '^PIN 0' "$O/strict.out" | cut -d' ' -f3-6 | tr '\n' ';')"
  fi
  if [ -f "$O/native-ledger.json" ] && [ -f "$O/strict-ledger.json" ]; then
    python3 "$here/shim_differential.py" "$O/native-ledger.json" "$O/native.out" "$O/strict-ledger.json" "$O/strict.out"
  else
    fail shim-differential "a ledger is missing: $(ls "$O"/*-ledger.json 2>&1 | tr '\n' ' ')"
  fi
  bylib=$(py "$rep" 'sum(g["registered_by_libcuda"] for g in d["gpus"])')
  bad=$(grep '^BUF 0 cuMemAlloc' "$O/strict.out" | grep -v -c '^BUF [0-9]* [^ ]* 1 ')
  n=$(grep -c '^BUF 0 cuMemAlloc' "$O/strict.out")
  [ "$n" -ge 4 ] && [ "$bad" = 0 ] && [ "$bylib" = 0 ] && pass shim-strict-cumemalloc "$n/$n cuMemAlloc buffers registered, $bylib of them by libcuda: $(grep '^BUF 0 cuMemAlloc' "$O/strict.out" | cut -d' ' -f3- | tr '\n' ';')" \
    || fail shim-strict-cumemalloc "by libcuda ${bylib:-?}; $(grep '^BUF 0 cuMemAlloc' "$O/strict.out" | tr '\n' ';')"
  v=$(grep '^BUF 0 VMM' "$O/strict.out")
  echo "$v" | grep -q '^BUF 0 VMM-64MiB 1 ' && pass shim-strict-vmm "VMM buffer registered: ${v#BUF 0 }" \
    || fail shim-strict-vmm "${v:-no BUF VMM line}"
  bad=$(grep '^FREED' "$O/strict.out" | grep -v -c '^FREED [0-9]* [^ ]* 0 ')
  n=$(grep -c '^FREED' "$O/strict.out")
  [ "$n" -ge 5 ] && [ "$bad" = 0 ] && pass shim-strict-freed "$n/$n freed buffers no longer registered: $(grep '^FREED' "$O/strict.out" | head -2 | cut -d' ' -f3- | tr '\n' ';')..." \
    || fail shim-strict-freed "$(grep '^FREED' "$O/strict.out" | tr '\n' ';')"
  errs=$(grep -c '^gdunlock: .*\(fail\|error\|refus\|not acting\)' "$O/strict.err")
  if diff <(grep ^SUM "$O/plain.out") <(grep ^SUM "$O/strict.out") >/dev/null && [ "$errs" = 0 ]; then
    pass shim-strict-data "GPU data identical to the run without the shim, no error lines from the shim"
  else
    fail shim-strict-data "$(grep ^SUM "$O/plain.out") vs $(grep ^SUM "$O/strict.out"); shim error lines: $errs"
  fi
fi

# ---- c. PyTorch -----------------------------------------------------------------
if ! python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
  skip shim-torch "python3 with CUDA torch not available"
else
  plainrun torch-plain timeout 600 python3 "$here/shim_torch.py"
  prc=$?
  shimrun torch GDUNLOCK_TEST_DROP_NATIVE=1 timeout 600 python3 "$here/shim_torch.py"
  rc=$?
  rep=$(report_of torch)
  a=$(sed -n 's/^CHECKSUM //p' "$O/torch-plain.out")
  b=$(sed -n 's/^CHECKSUM //p' "$O/torch.out")
  probed=$(sed -n 's/^PROBED \([0-9]*\) .*/\1/p' "$O/torch.out")
  registered=$(sed -n 's/^PROBED [0-9]* REGISTERED \([0-9]*\).*/\1/p' "$O/torch.out")
  regs=$([ -n "$rep" ] && py "$rep" 'sum(g["registered"] for g in d["gpus"])')
  if [ $prc -eq 0 ] && [ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && [ -n "$probed" ] && [ "$probed" = "$registered" ] && [ "${regs:-0}" -gt 0 ]; then
    pass shim-torch "checksum $a with and without the shim; $registered/$probed live tensors proved registered; report: $(gpus_summary "$rep")"
  else
    fail shim-torch "exit $prc/$rc, checksum '$a' vs '$b', $(grep ^PROBED "$O/torch.out"), report registrations ${regs:-none}; $(tail -2 "$O/torch.err" | tr '\n' ' ')"
  fi
  # The same script with the shim in plain (native) mode.
  shimrun torch-native timeout 600 python3 "$here/shim_torch.py"
  c=$(sed -n 's/^CHECKSUM //p' "$O/torch-native.out")
  [ -n "$a" ] && [ "$a" = "$c" ] && pass shim-torch-native "checksum $c unchanged with the shim in native mode" \
    || fail shim-torch-native "checksum '$a' vs '$c'"
  # Strict test mode: every tensor registration is the shim's own.
  shimrun torch-strict GDUNLOCK_TEST_DROP_NATIVE=strict timeout 600 python3 "$here/shim_torch.py"
  rc=$?
  rep=$(report_of torch-strict)
  c=$(sed -n 's/^CHECKSUM //p' "$O/torch-strict.out")
  probed=$(sed -n 's/^PROBED \([0-9]*\) .*/\1/p' "$O/torch-strict.out")
  registered=$(sed -n 's/^PROBED [0-9]* REGISTERED \([0-9]*\).*/\1/p' "$O/torch-strict.out")
  if [ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$c" ] && [ -n "$probed" ] && [ "$probed" = "$registered" ] && [ -n "$rep" ] && strict_ok "$rep"; then
    pass shim-strict-torch "checksum $c unchanged; $registered/$probed live tensors proved registered; report: $(strict_summary "$rep")"
  else
    fail shim-strict-torch "exit $rc, checksum '$a' vs '$c', $(grep ^PROBED "$O/torch-strict.out"), report: $([ -n "$rep" ] && strict_summary "$rep"); $(tail -2 "$O/torch-strict.err" | tr '\n' ' ')"
  fi
fi

# ---- d. cycles and storm --------------------------------------------------------
check_growth() { # NAME WHAT
  local name=$1 what=$2 rc=$3 before after
  before=$(tline "$name" before)
  after=$(tline "$name" after)
  local lb la cb ca ob oa fa
  lb=$(echo "$before" | sed -n 's/.* live=\([0-9]*\).*/\1/p'); la=$(echo "$after" | sed -n 's/.* live=\([0-9]*\).*/\1/p')
  cb=$(echo "$before" | sed -n 's/.* created=\([0-9]*\).*/\1/p'); ca=$(echo "$after" | sed -n 's/.* created=\([0-9]*\).*/\1/p')
  ob=$(echo "$before" | sed -n 's/.* objects=\([0-9]*\).*/\1/p'); oa=$(echo "$after" | sed -n 's/.* objects=\([0-9]*\).*/\1/p')
  fa=$(echo "$after" | sed -n 's/.* failures=\([0-9]*\).*/\1/p')
  local errors
  errors=$(sed -n 's/^ERRORS //p' "$O/$name.out")
  if [ "$rc" -eq 0 ] && [ "$errors" = 0 ] && [ -n "$la" ] && [ "$lb" = "$la" ] && [ "$cb" = "$ca" ] && [ "$ob" = "$oa" ] && [ "$fa" = 0 ]; then
    pass "shim-$name" "$what: CUDA errors 0, registrations live $lb->$la, NV503C made $cb->$ca, RM objects tracked $ob->$oa, shim failures 0 ($(echo "$after" | sed 's/.* registered=\([0-9]*\) unregistered=\([0-9]*\).*/registered \1, unregistered \2/'))"
  else
    fail "shim-$name" "$what: exit $rc, CUDA errors ${errors:-?}; before: $before; after: $after; $(tail -2 "$O/$name.err" | tr '\n' ' ')"
  fi
}
shimrun cycles GDUNLOCK_TEST_DROP_NATIVE=1 timeout 600 "$BIN/shim_gpu_stress" cycles 10000
check_growth cycles "10000 alloc/free cycles (2 MiB cuMemAlloc, every 100th a 64 MiB VMM buffer)" $?
shimrun storm GDUNLOCK_TEST_DROP_NATIVE=1 timeout 600 "$BIN/shim_gpu_stress" storm 8 500
check_growth storm "8 threads x 500 allocations of 2-8 MiB at once" $?
shimrun cycles-strict GDUNLOCK_TEST_DROP_NATIVE=strict timeout 600 "$BIN/shim_gpu_stress" cycles 10000
rc=$?
check_growth cycles-strict "strict test mode, 10000 alloc/free cycles" $rc
lb=$(tline cycles-strict before | sed -n 's/.* live=\([0-9]*\).*/\1/p')
ra=$(tline cycles-strict after | sed -n 's/.* registered=\([0-9]*\).*/\1/p')
ua=$(tline cycles-strict after | sed -n 's/.* unregistered=\([0-9]*\).*/\1/p')
rep=$(report_of cycles-strict)
if [ $rc -eq 0 ] && [ -n "$ra" ] && [ -n "$lb" ] && [ "$ra" = $((ua + lb)) ] && [ "$ra" -ge 10000 ] && [ -n "$rep" ] && strict_ok "$rep"; then
  pass shim-strict-cycles-balance "registered $ra == unregistered $ua + live before $lb, none by libcuda; report: $(strict_summary "$rep")"
else
  fail shim-strict-cycles-balance "exit $rc, registered ${ra:-?}, unregistered ${ua:-?}, live before ${lb:-?}; report: $([ -n "$rep" ] && strict_summary "$rep")"
fi

# ---- e. two GPUs ------------------------------------------------------------------
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${ngpu:-0}" -lt 2 ]; then
  skip shim-two-gpus "$ngpu GPU(s) here; this check needs two (nvidia-h200-x2)"
else
  shimrun multi GDUNLOCK_TEST_DROP_NATIVE=1 timeout 600 "$BIN/shim_gpu_buffers" all
  rc=$?
  rep=$(report_of multi)
  ndev=$(sed -n 's/^DEVICES //p' "$O/multi.out")
  devs_ok=0
  for d in $(seq 0 $((ndev - 1))); do
    n=$(grep -c "^BUF $d " "$O/multi.out")
    good=$(grep -c "^BUF $d [^ ]* 1 " "$O/multi.out")
    [ "$n" -ge 5 ] && [ "$n" = "$good" ] && devs_ok=$((devs_ok + 1))
  done
  unlocked=$([ -n "$rep" ] && py "$rep" 'sum(1 for g in d["gpus"] if g["mode"] == "unlocked" and g["registered"] > 0)')
  if [ $rc -eq 0 ] && [ "${ndev:-0}" -ge 2 ] && [ "$devs_ok" = "$ndev" ] && [ "${unlocked:-0}" -ge 2 ]; then
    pass shim-two-gpus "$ndev CUDA devices, all buffers registered on each; $(gpus_summary "$rep")"
  else
    fail shim-two-gpus "exit $rc, devices ${ndev:-?}, devices with all buffers registered $devs_ok, unlocked GPUs with registrations ${unlocked:-?}; $(tail -2 "$O/multi.out" "$O/multi.err" | tr '\n' ' ')"
  fi
  shimrun multi-strict GDUNLOCK_TEST_DROP_NATIVE=strict timeout 600 "$BIN/shim_gpu_buffers" all
  rc=$?
  rep=$(report_of multi-strict)
  devs_ok=0
  for d in $(seq 0 $((ndev - 1))); do
    n=$(grep -c "^BUF $d " "$O/multi-strict.out")
    good=$(grep -c "^BUF $d [^ ]* 1 " "$O/multi-strict.out")
    [ "$n" -ge 5 ] && [ "$n" = "$good" ] && devs_ok=$((devs_ok + 1))
  done
  unlocked=$([ -n "$rep" ] && py "$rep" 'sum(1 for g in d["gpus"] if g["mode"] == "unlocked" and g["registered"] > 0 and g["va_spaces_registered"] == 1)')
  if [ $rc -eq 0 ] && [ "${ndev:-0}" -ge 2 ] && [ "$devs_ok" = "$ndev" ] && [ "${unlocked:-0}" -ge 2 ] && strict_ok "$rep"; then
    pass shim-strict-two-gpus "$ndev CUDA devices, all buffers registered on each, none by libcuda; $(strict_summary "$rep")"
  else
    fail shim-strict-two-gpus "exit $rc, devices with all buffers registered $devs_ok, unlocked GPUs ${unlocked:-?}; $([ -n "$rep" ] && strict_summary "$rep"); $(tail -2 "$O/multi-strict.err" | tr '\n' ' ')"
  fi
fi

# ---- f. overhead --------------------------------------------------------------------
# Pairs of runs, one without and one with the shim, the order alternating,
# pinned to one CPU: the median of the pairs' ratios. Single runs of this loop
# vary by +-20 % on this machine, mostly from run to run; a ratio within a
# pair cancels that drift, which medians of each side (batch 1 of 2026-12-01:
# 1.031 over 15 runs) do not.
pin=""
command -v taskset >/dev/null && pin="taskset -c 3"
pairs=""
for i in $(seq 1 21); do
  if [ $((i % 2)) = 1 ]; then
    plainrun ovh-plain-$i timeout 300 $pin "$BIN/shim_gpu_stress" overhead 6000
    shimrun ovh-shim-$i timeout 300 $pin "$BIN/shim_gpu_stress" overhead 6000
  else
    shimrun ovh-shim-$i timeout 300 $pin "$BIN/shim_gpu_stress" overhead 6000
    plainrun ovh-plain-$i timeout 300 $pin "$BIN/shim_gpu_stress" overhead 6000
  fi
  pairs="$pairs $(sed -n 's/^PAIR_NS //p' "$O/ovh-plain-$i.out"):$(sed -n 's/^PAIR_NS //p' "$O/ovh-shim-$i.out")"
done
shimrun ovh-testmode GDUNLOCK_TEST_DROP_NATIVE=1 timeout 300 $pin "$BIN/shim_gpu_stress" overhead 6000
t=$(sed -n 's/^PAIR_NS //p' "$O/ovh-testmode.out")
verdict=$(python3 - "$pairs" "${t:-0}" <<'PY'
import statistics, sys
pairs = [tuple(int(v) for v in p.split(":")) for p in sys.argv[1].split() if p.count(":") == 1 and "" not in p.split(":")]
test = int(sys.argv[2])
if len(pairs) < 11:
    print("FAIL no timing: %d complete pairs" % len(pairs))
    sys.exit()
ratios = sorted(s / p for p, s in pairs)
r = statistics.median(ratios)
plain = [p for p, _ in pairs]
shim = [s for _, s in pairs]
q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
line = ("cuMemAlloc+cuMemFree of 2 MiB, %d pairs of runs x 6000 (order alternating, one CPU): median ratio %.3f "
        "(middle half %.3f..%.3f); medians %d ns without (%d..%d), %d ns with the shim (%d..%d); test mode, "
        "registering each buffer: %d ns (%.3f of the plain median)"
        % (len(pairs), r, q1, q3, statistics.median(plain), min(plain), max(plain), statistics.median(shim),
           min(shim), max(shim), test, test / statistics.median(plain)))
print(("PASS " if r <= 1.02 else "FAIL ") + line + (" <= 1.02" if r <= 1.02 else " > 1.02"))
PY
)
echo "${verdict%% *} shim-overhead: ${verdict#* }"
# The cost of an ioctl the shim does not watch (a pipe's FIONREAD), with and
# without it, alternating; medians of 7 runs of 2,000,000 calls.
if [ -x "$BIN/shim_ioctl_cost" ]; then
  pc="" sc=""
  for i in 1 2 3 4 5 6 7; do
    plainrun ioc-plain-$i "$BIN/shim_ioctl_cost" 2000000
    pc="$pc $(sed -n 's/^NS_PER_IOCTL //p' "$O/ioc-plain-$i.out")"
    shimrun ioc-shim-$i "$BIN/shim_ioctl_cost" 2000000
    sc="$sc $(sed -n 's/^NS_PER_IOCTL //p' "$O/ioc-shim-$i.out")"
  done
  python3 - "$pc" "$sc" <<'PY'
import statistics, sys
p = [float(x) for x in sys.argv[1].split()]
s = [float(x) for x in sys.argv[2].split()]
if len(p) < 5 or len(s) < 5:
    print("FAIL shim-ioctl-cost: no timing (%d / %d runs)" % (len(p), len(s)))
else:
    mp, ms = statistics.median(p), statistics.median(s)
    print("PASS shim-ioctl-cost: an ioctl the shim does not watch (pipe FIONREAD), median of %d alternating runs "
          "x 2,000,000: %.1f ns without (%.1f..%.1f), %.1f ns with the shim (%.1f..%.1f): +%.1f ns per call"
          % (len(p), mp, min(p), max(p), ms, min(s), max(s), ms - mp))
PY
fi

# ---- g. life cycles -------------------------------------------------------------------
for mode in fork noexit xthread "ctxloop 50"; do
  name=life-${mode%% *}
  plainrun "$name-plain" timeout 300 "$BIN/shim_gpu_lifecycle" $mode
  prc=$?
  shimrun "$name" GDUNLOCK_TEST_DROP_NATIVE=1 timeout 300 "$BIN/shim_gpu_lifecycle" $mode
  rc=$?
  a=$(grep ^RESULT "$O/$name-plain.out")
  b=$(grep ^RESULT "$O/$name.out")
  rep=$(report_of "$name")
  if [ $prc -eq 0 ] && [ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && [ -n "$rep" ]; then
    pass "shim-$name" "'$b' with and without the shim, exit 0 both; report: $(gpus_summary "$rep")"
  else
    fail "shim-$name" "exit $prc/$rc, '$a' vs '$b', report ${rep:-missing}; $(tail -2 "$O/$name.err" | tr '\n' ' ')"
  fi
done

# ---- h. off switch and the CLI ---------------------------------------------------------
shimrun disabled GDUNLOCK=0 timeout 300 "$BIN/shim_gpu_buffers" 0
rc=$?
if [ $rc -eq 0 ] && [ -z "$(report_of disabled)" ] && grep -q '^TOTALS end none' "$O/disabled.out" &&
  diff <(grep ^SUM "$O/plain.out") <(grep ^SUM "$O/disabled.out") >/dev/null; then
  pass shim-disabled "GDUNLOCK=0: no report, test queries answer 'not active', same GPU data"
else
  fail shim-disabled "exit $rc, report $(report_of disabled), $(grep ^TOTALS "$O/disabled.out")"
fi
if [ -x "$BIN/gdunlock" ]; then
  timeout 300 "$BIN/gdunlock" run --json --test-drop-native -- "$BIN/shim_gpu_buffers" 0 >"$O/run-cli.json" 2>"$O/run-cli.err"
  rc=$?
  modes=$(python3 -c 'import json,sys; t=sys.stdin.read(); d=json.loads(t[t.index("{\n"):]); print(" ".join(g["mode"] for p in d["processes"] for g in p["gpus"]), d["exit_status"])' <"$O/run-cli.json" 2>/dev/null)
  timeout 300 "$BIN/gdunlock" run -- "$BIN/shim_gpu_buffers" 0 >"$O/run-cli-table.out" 2>"$O/run-cli-table.err"
  if [ $rc -eq 0 ] && echo "$modes" | grep -q unlocked && grep -q 'shim report' "$O/run-cli-table.err"; then
    pass shim-run-cli "gdunlock run --json --test-drop-native: modes and exit status '$modes'; table printed without --json"
  else
    fail shim-run-cli "exit $rc, '$modes'; $(tail -2 "$O/run-cli.err" | tr '\n' ' ')"
  fi
fi
exit 0
