#!/usr/bin/env bash
# p2p-build without NVIDIA's sources: bad arguments, a missing tool, a source
# of another version, the download of a release checked by its tree id, and
# nothing written outside --out. Each case checks the exit code (sysexits, as
# in the program's header) and that the last stderr line names the cause.
# Usage: p2p_build_args.sh P2P-BUILD
set -uo pipefail
build=${1:?usage: p2p_build_args.sh P2P-BUILD}
for tool in spatch git tar; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (Debian: coccinelle, git, tar)"; exit 77; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/p2p build args.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0
ok() { printf 'ok: %s\n' "$1"; }
fail() { printf 'FAIL: %s\n' "$1"; fails=$((fails + 1)); }

# expect NAME CODE PATTERN -- COMMAND...: exit CODE, last stderr line matches.
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  "$@" >"$work/stdout" 2>"$work/stderr"
  local rc=$?
  local last
  last=$(tail -n1 "$work/stderr")
  if [ $rc != "$code" ]; then
    fail "$name: exit $rc, expected $code ($last)"
  elif ! grep -qE -- "$pattern" <<<"$last"; then
    fail "$name: last stderr line does not match /$pattern/: $last"
  else
    ok "$name"
  fi
}

expect "no --out" 64 '--out DIR is required' -- "$build" --source "$work"
expect "unknown argument" 64 'unknown argument --frobnicate' -- "$build" --out "$work/o" --frobnicate
expect "version not a version" 64 'is not a driver version' -- "$build" --out "$work/o" --version 5x5
expect "missing source" 66 'does not exist' -- "$build" --out "$work/o" --source "$work/nothing here"
expect "out not creatable" 73 'cannot create' -- "$build" --out /proc/gdunlock-test/o --source "$work"

# A PATH without spatch: the tool and its Debian package are named.
mkdir -p "$work/bin"
for t in bash env dirname mkdir rm touch cat sed awk grep sort head tail wc cp mv tar find df python3 nproc uname; do
  p=$(command -v $t) && ln -sf "$p" "$work/bin/$t"
done
expect "no spatch" 69 'spatch is missing.*coccinelle' -- env PATH="$work/bin" "$build" --out "$work/o" --source "$work"

# A tree that is not NVIDIA's (a fake of a few files, written here).
fake=$work/fake-src/open-gpu-kernel-modules-1.2.3
mkdir -p "$fake/kernel-open"
echo 'NVIDIA_VERSION = 1.2.3' >"$fake/version.mk"
echo 'int gdunlock_fake;' >"$fake/kernel-open/fake.c"
tar -C "$work/fake-src" -czf "$work/1.2.3.tar.gz" open-gpu-kernel-modules-1.2.3
expect "source of another version" 66 'sources are of driver 1.2.3, the driver here is 9.9.9' -- \
  "$build" --out "$work/o" --source "$work/1.2.3.tar.gz" --version 9.9.9 --no-kernel
expect "folder that is not the sources" 66 'holds no version.mk' -- "$build" --out "$work/o" --source "$work/bin" --no-kernel
grep -q '"status": "failed"' "$work/o/build.json" && ok "build.json says failed" || fail "build.json after a refusal: $(cat "$work/o/build.json")"

# The download of a release, from a fake mirror, checked by its tree id.
edits=$work/edits
cp -r "$(dirname "$build")/edits" "$edits"
tree=$(git init -q --bare "$work/t.git" && GIT_DIR=$work/t.git GIT_WORK_TREE=$fake git add -A -f &&
  GIT_DIR=$work/t.git git write-tree)
printf '1.2.3\t0000000000000000000000000000000000000000\t%s\n' "$tree" >"$edits/nvidia-releases.tsv"
printf '1.2.4\t0000000000000000000000000000000000000000\t%s\n' "$tree" >>"$edits/nvidia-releases.tsv"
cp "$work/1.2.3.tar.gz" "$work/1.2.4.tar.gz"
sentinel=$work/sentinel
mkdir -p "$sentinel"
run() { env HOME="$sentinel" TMPDIR="$sentinel" GDUNLOCK_P2P_APT=0 GDUNLOCK_P2P_EDITS="$edits" \
  GDUNLOCK_NVIDIA_URL="file://${work// /%20}" "$build" "$@"; }
# The tree matches: the download is taken, and the edits then find no code.
expect "download checked and taken" 65 'edit rebar-gate: kernel-open/nvidia/nv-pci.c is not in the sources of 1.2.3' -- \
  run --out "$work/dl" --version 1.2.3 --no-kernel
grep -q 'the download matches NVIDIA.s tag 1.2.3' "$work/stderr" && ok "download reported as matching" ||
  fail "no match line: $(cat "$work/stderr")"
[ -z "$(ls -A "$sentinel")" ] && ok "nothing written outside --out" || fail "written outside --out: $(ls -A "$sentinel")"
# One byte changed in the tarball's content: refused, nothing built.
echo 'int gdunlock_changed;' >"$fake/kernel-open/fake.c"
tar -C "$work/fake-src" -czf "$work/1.2.3.tar.gz" open-gpu-kernel-modules-1.2.3
expect "download that differs from the tag" 66 'download of 1.2.3 does not match NVIDIA.s tag' -- \
  run --out "$work/dl" --version 1.2.3 --no-kernel
[ ! -e "$work/dl/source" ] && ok "a download that differs is removed" || fail "the differing download was kept"
# Its version.mk says 1.2.3: a tarball for 1.2.4 that holds 1.2.3 is refused.
expect "download of another version" 66 'sources are of driver 1.2.3, the driver here is 1.2.4' -- \
  run --out "$work/dl" --version 1.2.4 --no-kernel
expect "unknown release" 66 'not a release this gdunlock knows' -- run --out "$work/dl" --version 7.7.7 --no-kernel
expect "mirror unreachable" 66 'cannot download' -- \
  env GDUNLOCK_NVIDIA_URL="file://${work// /%20}/none" GDUNLOCK_P2P_APT=0 GDUNLOCK_P2P_EDITS="$edits" \
  "$build" --out "$work/dl" --version 1.2.3 --no-kernel
expect "no kernel headers" 69 'no kernel headers at /nonexistent.*linux-headers' -- \
  run --out "$work/dl" --version 1.2.3 --kernel-headers /nonexistent

# The kernel build, with no edit to make (an empty manifest) and a fake tree
# whose makefile stands for NVIDIA's: the split headers of Debian give
# SYSSRC and SYSOUT, the modules are listed, and a kernel newer than the
# driver (pci_resize_resource's arguments) is named as such.
noedits=$work/noedits
mkdir -p "$noedits" "$work/headers/common" "$work/headers/amd64"
echo '# no edits' >"$noedits/manifest.tsv"
echo 'all:' >"$work/headers/common/Makefile"
echo "include $work/headers/common/Makefile" >"$work/headers/amd64/Makefile"
kfake=$work/kfake
mkdir -p "$kfake/kernel-open"
echo 'NVIDIA_VERSION = 1.2.3' >"$kfake/version.mk"
printf 'modules:\n\techo "$(SYSSRC) $(SYSOUT)" >kernel-open/sys.txt\n\ttouch kernel-open/nvidia.ko kernel-open/nvidia-uvm.ko\n' \
  >"$kfake/Makefile"
expect "kernel modules built" 0 'done' -- env GDUNLOCK_P2P_EDITS="$noedits" "$build" --out "$work/k" --source "$kfake" \
  --kernel-headers "$work/headers/amd64" --json
[ "$(cat "$work/k/source/kernel-open/sys.txt")" = "$work/headers/common $work/headers/amd64" ] &&
  ok "SYSSRC and SYSOUT from Debian's split headers" || fail "SYSSRC SYSOUT: $(cat "$work/k/source/kernel-open/sys.txt")"
python3 - "$work/stdout" <<'EOF' && ok "build.json lists the modules" || fail "build.json: $(cat "$work/stdout")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "ok" and d["kernel"]["built"], d
assert d["kernel"]["modules"] == ["source/kernel-open/nvidia-uvm.ko", "source/kernel-open/nvidia.ko"], d
EOF
# gcc's own words on Debian's 6.1.192 headers (typographic quotes, UTF-8).
printf 'modules:\n\t@echo "kernel-open/nvidia/nv-pci.c:224:9: error: too few arguments to function \xe2\x80\x98pci_resize_resource\xe2\x80\x99"; exit 2\n' \
  >"$kfake/Makefile"
expect "kernel newer than the driver" 70 "pci_resize_resource\(\) takes other arguments .* newer than driver 1.2.3" -- \
  env GDUNLOCK_P2P_EDITS="$noedits" "$build" --out "$work/k" --source "$kfake" --kernel-headers "$work/headers/amd64"
printf 'modules:\n\t@echo "foo.c:1:1: error: something else"; exit 2\n' >"$kfake/Makefile"
expect "compile error named" 70 'building the kernel modules failed: foo.c:1:1: error: something else \(log: ' -- \
  env GDUNLOCK_P2P_EDITS="$noedits" "$build" --out "$work/k" --source "$kfake" --kernel-headers "$work/headers/amd64"

# A full disk: --out on a 1 MiB tmpfs, a source that does not fit. Needs the
# right to mount (root with CAP_SYS_ADMIN); elsewhere this case says so.
full=$work/full
mkdir -p "$full" "$work/big/open-gpu-kernel-modules-1.2.3"
if mount -t tmpfs -o size=1m tmpfs "$full" 2>/dev/null; then
  trap 'umount "$full"; rm -rf "$work"' EXIT
  echo 'NVIDIA_VERSION = 1.2.3' >"$work/big/open-gpu-kernel-modules-1.2.3/version.mk"
  head -c 3000000 /dev/zero >"$work/big/open-gpu-kernel-modules-1.2.3/filler"
  tar -C "$work/big" -czf "$work/big.tar.gz" open-gpu-kernel-modules-1.2.3
  expect "full disk named" 74 "the disk holding $full/o is full" -- "$build" --out "$full/o" --source "$work/big.tar.gz" --no-kernel
else
  echo "skip: full disk (cannot mount a tmpfs here)"
fi

[ $fails = 0 ] || { echo "$fails case(s) failed"; exit 1; }
echo "all cases passed"
