#!/usr/bin/env bash
# gdunlock p2p unlock end to end: --check on the fixture sysroots, --build
# through a stub build program, --install / --status / --revert on a fake
# root (a copy of a fixture) with fake dkms, modprobe and mokutil on PATH
# that record their calls (tests/cli/unlock-fakes), and each bad input a
# clear error that leaves nothing installed.
# Usage: p2p_unlock.sh GDUNLOCK FIXTURES_DIR
set -uo pipefail
bin=$(realpath "$1")
fixtures=$(realpath "$2")
fakes=$(dirname "$(realpath "$0")")/unlock-fakes
work=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock unlock XXXXXX")
trap 'rm -rf "$work"' EXIT
export FAKE_LOG="$work/calls.log" PATH="$fakes:$PATH" GDUNLOCK_P2P_BUILD="$fakes/p2p-build"
unset GDUNLOCK_UNLOCK_ROOT FAKE_DKMS_FAIL FAKE_BUILD FAKE_MOK_ENROLLED
fail=0
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
ok() { echo "ok   $*"; }

# run WANT_RC ARGS...: gdunlock p2p unlock ARGS, stdout in $work/out, stderr in $work/err.
run() {
  local want=$1; shift
  : >"$FAKE_LOG"
  (cd "$work" && "$bin" p2p unlock "$@" >"$work/out" 2>"$work/err")
  local rc=$?
  if [ $rc -ne "$want" ]; then
    bad "p2p unlock $*: exit $rc, expected $want"; cat "$work/out" "$work/err"; return 1
  fi
  return 0
}
has() { grep -qF -- "$2" "$1" || { bad "$3: '$2' not in $(basename "$1"): $(head -c 600 "$1")"; return 1; }; }
# json EXPR LABEL: EXPR (Python, over d, the document on stdout) holds.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$work/out" ||
  { bad "$2: $1 is false in $(head -c 600 "$work/out")"; return 1; }; }
# A fresh fake root from a fixture.
root() { rm -rf "$work/root"; cp -a "$fixtures/$1" "$work/root"; }
# Nothing of an install is left in the fake root.
clean() {
  local left
  left=$(cd "$work/root" && ls -d etc/modprobe.d/gdunlock* usr/src/gdunlock* var/lib/gdunlock/* \
    var/lib/dkms/gdunlock* 2>/dev/null)
  [ -z "$left" ] || { bad "$1: left behind: $left"; return 1; }
}

# ---- --check ----
for c in "unlock/rtx4090x2-patched-module patched_module" "unlock/rtx5090x2-registry-keys registry_keys" \
         "unlock/rtx5090x2-nothing nothing" "doctor/h200-vm nothing" "unlock/rtx4090x2-display impossible" \
         "doctor/rtx4090x2-stock patched_module" "doctor/proprietary-535 impossible"; do
  set -- $c
  run 0 --check --json --sysroot "$fixtures/$1" &&
    json "d['plan'] == '$2' and d['schema'] == 'gdunlock-p2p-unlock-check/1'" "--check $1" && ok "--check $1: $2"
done
run 0 --sysroot "$fixtures/doctor/h200-vm" && has "$work/out" "P2P unlock plan: nothing to do" "h200" &&
  has "$work/out" "P2P now: NVLink" "h200" && has "$work/out" "not a GeForce" "h200" && ok "--check (default) on the H200 capture"
run 66 --sysroot "$work/no such folder" && has "$work/err" "no such folder" "missing sysroot" && ok "--check on a missing sysroot: 66"
run 64 --check --install && ok "two actions: 64"
run 64 --check --out "$work/x" && ok "--out without --build/--install: 64"

# ---- doctor and gdunlock p2p name the plan and the command in a refused GeForce pair's fix ----
(cd "$work" && "$bin" p2p --no-bench --sysroot "$fixtures/unlock/rtx4090x2-patched-module" >"$work/out" 2>&1)
has "$work/out" "fix: plan 'patched module': driver 580.95.05 has no BAR1 P2P for Ada GPUs" "p2p fix" &&
  has "$work/out" "run 'gdunlock p2p unlock --build --out DIR', then 'sudo gdunlock p2p unlock --install --out DIR'" "p2p command" &&
  ok "gdunlock p2p: a refused GeForce pair names the patched-module plan and the commands"
(cd "$work" && "$bin" p2p --no-bench --sysroot "$fixtures/unlock/rtx5090x2-registry-keys" >"$work/out" 2>&1)
has "$work/out" "fix: plan 'registry keys only'" "p2p keys" && has "$work/out" "run 'sudo gdunlock p2p unlock --install'" "p2p keys command" &&
  ok "gdunlock p2p: GB20x on 580 names the registry-keys plan"
(cd "$work" && "$bin" doctor --json --sysroot "$fixtures/unlock/rtx4090x2-display" >"$work/out" 2>&1)
json "any('plan \\'impossible here\\'' in f.get('fix', '') and 'drives a display' in f['fix'] for f in d['findings'] if f['id'] == 'p2p.gpu0-gpu1')" "doctor display" &&
  ok "doctor: the pair's fix names the blocking fact (a display) and its fix"

# ---- --build through the build program ----
run 0 --build --source "$work/src.tar.xz" --out "$work/out-dir" && has "$work/out" "built 580.95.05" "build" &&
  [ -f "$work/out-dir/build.json" ] && has "$FAKE_LOG" "--source $work/src.tar.xz" "build args" && ok "--build runs the build program"
FAKE_BUILD=edit run 65 --build --source "$work/src" --out "$work/o2" &&
  has "$work/err" "edit bar1-p2p-mapping did not apply to kbusCreateP2PMapping_GP100 in 580.95.05" "failed edit" &&
  has "$work/err" "fix: report it with build.log" "failed edit fix" && ok "--build: an edit that does not apply: 65, named"
FAKE_BUILD=version run 66 --build --source "$work/src" --out "$work/o3" &&
  has "$work/err" "no source of 580.95.05" "unknown version" && ok "--build: no source of that version: 66"
GDUNLOCK_P2P_BUILD="$work/none" run 69 --build --source x && has "$work/err" "GDUNLOCK_P2P_BUILD" "no program" && ok "--build without the program: 69"

# ---- --install, --status, --revert on a fake root ----
out="$work/build out"
"$fakes/p2p-build" --out "$out" --version 580.95.05 2>/dev/null
root unlock/rtx4090x2-patched-module
mkdir -p "$work/root/var/lib/dkms/nvidia/580.95.05" "$work/root/usr/src/nvidia-580.95.05"
echo 'PACKAGE_NAME="nvidia"' >"$work/root/usr/src/nvidia-580.95.05/dkms.conf"
run 0 --install --sysroot "$work/root" --out "$out" &&
  has "$work/root/etc/modprobe.d/gdunlock-nvidia-p2p.conf" "options nvidia NVreg_EnableResizableBar=1" "options" &&
  has "$work/root/usr/src/gdunlock-nvidia-p2p-580.95.05/dkms.conf" 'BUILT_MODULE_NAME[1]="nvidia-uvm"' "dkms.conf" &&
  has "$work/root/var/lib/gdunlock/p2p-unlock.json" '"status": "installed"' "state" &&
  has "$FAKE_LOG" "dkms remove nvidia/580.95.05 --all" "stock steps aside" &&
  has "$FAKE_LOG" "dkms install gdunlock-nvidia-p2p/580.95.05 -k 6.8.0-45-generic --dkmstree $work/root/var/lib/dkms" "dkms install" &&
  has "$FAKE_LOG" "modprobe --dirname $work/root --set-version 6.8.0-45-generic --show-depends nvidia" "modprobe" &&
  has "$work/out" "next: load it: reboot" "next" && ok "--install: DKMS, options, state, how to load it"
run 1 --install --sysroot "$work/root" --out "$out" && has "$work/err" "installed already" "twice" && ok "--install twice: refused"
# status: the stock module still runs, then gdunlock's
mkdir -p "$work/root/sys/module/nvidia"
echo 0123456789ABCDEF0123456 >"$work/root/sys/module/nvidia/srcversion"
mkdir -p "$work/root/var/log"
printf '[    3.1] NVRM: loading NVIDIA UNIX Open Kernel Module\n[    3.2] NVRM: GPU 0000:03:00.0: BAR1 P2P enabled\n[    3.3] usb 1-1: new device\n' >"$work/root/var/log/dmesg"
run 0 --status --sysroot "$work/root" && has "$work/out" "running: the stock module" "status stock" &&
  has "$work/out" "reboot or reload" "status stock why" && ok "--status: installed, not running yet"
echo 4E3C2B1A0F9D8E7C6B5A493 >"$work/root/sys/module/nvidia/srcversion"
run 0 --status --sysroot "$work/root" && has "$work/out" "running: gdunlock's unlock" "status patched" &&
  has "$work/out" "BAR1 P2P enabled" "kernel log" && ! grep -q "usb 1-1" "$work/out" && ok "--status: gdunlock's module runs, P2P log lines"
run 0 --status --json --sysroot "$work/root" &&
  json "d['status']['patched'] is True and d['status']['dkms_module'] == 'gdunlock-nvidia-p2p/580.95.05' and d['matrix']['pairs'] is not None and d['schema'] == 'gdunlock-p2p-unlock-status/1'" "status json" &&
  ok "--status --json: status and the P2P matrix"
run 0 --revert --sysroot "$work/root" && clean "revert" &&
  has "$FAKE_LOG" "dkms remove gdunlock-nvidia-p2p/580.95.05 --all" "revert dkms" &&
  has "$FAKE_LOG" "dkms install nvidia/580.95.05 -k 6.8.0-45-generic" "stock back" && ok "--revert: back to the stock module"
run 0 --revert --sysroot "$work/root" && has "$work/out" "nothing of gdunlock's unlock was installed" "revert twice" && ok "--revert twice: nothing to do"

# registry keys only: options, no DKMS
root unlock/rtx5090x2-registry-keys
run 0 --install --sysroot "$work/root" &&
  has "$work/root/etc/modprobe.d/gdunlock-nvidia-p2p.conf" 'NVreg_RegistryDwords="RMForceP2PType=1;RMPcieP2PType=1"' "keys" &&
  ! grep -q dkms "$FAKE_LOG" && ok "--install, registry keys plan: options only"
run 0 --revert --sysroot "$work/root" && clean "revert keys" && ok "--revert, registry keys plan"

# ---- bad input: a clear error, nothing installed ----
# refuse CODE RC FIXTURE TEXT [ENV=VALUE...] -- ARGS...
refuse() {
  local code=$1 rc=$2 fixture=$3 text=$4; shift 4
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  root "$fixture"
  : >"$FAKE_LOG"
  (cd "$work" && env "${envs[@]}" "$bin" p2p unlock --json --sysroot "$work/root" "$@" >"$work/out" 2>"$work/err")
  local got=$?
  [ $got -eq "$rc" ] || { bad "$code: exit $got, expected $rc: $(cat "$work/err")"; return; }
  json "d['error']['code'] == '$code'" "$code" || return
  has "$work/err" "$text" "$code" || return
  grep -q "  fix: " "$work/err" || { bad "$code: no fix"; return; }
  clean "$code" && ok "refused with a fix: $code ($text)"
}
bad_out() { rm -rf "$work/bad"; cp -a "$out" "$work/bad"; python3 -c "import json,sys; p=sys.argv[1]+'/build.json'; d=json.load(open(p)); $1; json.dump(d, open(p,'w'))" "$work/bad"; }
bad_out "d['status'] = 'failed'; d['error'] = 'the compile failed'"
refuse build_not_ok 1 unlock/rtx4090x2-patched-module 'says "status": "failed"' X=1 -- --install --out "$work/bad"
rm -rf "$work/bad"; mkdir -p "$work/bad"
refuse no_build 66 unlock/rtx4090x2-patched-module "build.json" X=1 -- --install --out "$work/bad"
bad_out "d['kernel']['built'] = False"
refuse no_kernel_modules 1 unlock/rtx4090x2-patched-module "built with --no-kernel" X=1 -- --install --out "$work/bad"
bad_out "d['version'] = '575.64.05'"
refuse version_mismatch 1 unlock/rtx4090x2-patched-module "built from 575.64.05 but the loaded driver is 580.95.05" X=1 -- --install --out "$work/bad"
refuse no_out 64 unlock/rtx4090x2-patched-module "--out DIR" X=1 -- --install
refuse impossible 1 unlock/rtx4090x2-proprietary "proprietary" X=1 -- --install --out "$out"
refuse impossible 1 unlock/rtx4090x2-old-driver "older than the oldest release" X=1 -- --install --out "$out"
refuse impossible 1 unlock/rtx4090x2-small-bar1 "BAR1 is 256.00 MiB but video memory is 24.00 GiB" X=1 -- --install --out "$out"
refuse impossible 1 unlock/rtx4090x2-display "drives a display" X=1 -- --install --out "$out"
refuse nothing_to_do 1 doctor/h200-vm "nothing to install" X=1 -- --install --out "$out"
refuse missing_prerequisite 69 unlock/rtx4090x2-no-toolchain "kernel headers: none" X=1 -- --install --out "$out"
refuse missing_prerequisite 69 unlock/rtx4090x2-secure-boot-no-key "no signing key" X=1 -- --install --out "$out"
refuse key_not_enrolled 1 unlock/rtx4090x2-secure-boot-key "is not enrolled" FAKE_MOK_ENROLLED=0 -- --install --out "$out"
has "$FAKE_LOG" "mokutil --test-key $work/root/var/lib/dkms/mok.pub" "mokutil asked"
root unlock/rtx4090x2-secure-boot-key
FAKE_MOK_ENROLLED=1 run 0 --install --sysroot "$work/root" --out "$out" && ok "--install under Secure Boot with an enrolled key"
# a failed step undoes the ones before it, the stock module included
refuse step_failed 1 unlock/rtx4090x2-patched-module "Bad return status for module build" FAKE_DKMS_FAIL=install -- --install --out "$out"
# an interrupted install (the process killed mid-way): refused, then reverted whole
root unlock/rtx4090x2-patched-module
mkdir -p "$work/root/var/lib/gdunlock" "$work/root/usr/src/gdunlock-nvidia-p2p-580.95.05.partial/src" \
  "$work/root/var/lib/dkms/gdunlock-nvidia-p2p/580.95.05"
echo '{"status": "installing", "plan": "patched_module", "version": "580.95.05", "steps": ["source", "dkms"]}' \
  >"$work/root/var/lib/gdunlock/p2p-unlock.json"
run 1 --install --sysroot "$work/root" --out "$out" && has "$work/err" "interrupted" "interrupted" &&
  has "$work/err" "--revert" "interrupted fix" && ok "--install after an interrupted one: refused, names --revert"
run 0 --revert --sysroot "$work/root" && clean "revert after interruption" && ok "--revert after an interrupted install"

# the machine itself (no --sysroot) as a user other than root: refused before anything
if [ "$(id -u)" -ne 0 ]; then
  run 77 --revert && has "$work/err" "needs root" "not root" && ok "--revert as a user: 77, needs root"
elif command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
  (cd / && setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" p2p unlock --revert >"$work/out" 2>"$work/err")
  rc=$?
  if [ $rc -eq 126 ] || [ $rc -eq 127 ]; then
    echo "skip --revert as nobody: it cannot run $bin"
  else
    [ $rc -eq 77 ] && has "$work/err" "needs root" "not root" && ok "--revert as nobody: 77, needs root" ||
      bad "--revert as nobody: exit $rc: $(cat "$work/err")"
  fi
fi

[ "$fail" -eq 0 ] && echo "all passed" || echo "$fail failed"
exit $((fail > 0))
