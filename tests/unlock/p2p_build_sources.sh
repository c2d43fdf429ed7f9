#!/usr/bin/env bash
# p2p-build on NVIDIA's real sources (CI: Debian's source packages, see
# .ci/run): the edits apply, the edited RM core objects compile, the patch is
# written, nothing lands outside --out; a source whose edited function was
# renamed, or whose edited code changed shape, is refused naming the edit,
# the function and the version; an interrupted build leaves no build.json
# that says ok. The mutants are made here from the real sources.
# Usage: p2p_build_sources.sh P2P-BUILD
# Sources: GDUNLOCK_P2P_SOURCES, a colon-separated list of source tarballs or
# folders (e.g. nvidia-open-gpu-kernel-modules_535.261.03.orig.tar.xz).
set -uo pipefail
build=${1:?usage: p2p_build_sources.sh P2P-BUILD}
for tool in spatch make cc tar; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (Debian: coccinelle, build-essential)"; exit 77; }
done
sources=()
IFS=: read -r -a listed <<<"${GDUNLOCK_P2P_SOURCES:-}"
for s in "${listed[@]}"; do
  [ -n "$s" ] && [ -e "$s" ] && sources+=("$s")
done
if [ ${#sources[@]} = 0 ]; then
  echo "SKIP: no NVIDIA open kernel module sources at hand: set GDUNLOCK_P2P_SOURCES to their tarballs"
  echo "      or folders, colon-separated (.ci/run fetches Debian's with apt-get source)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/p2p build sources.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0
ok() { printf 'ok: %s\n' "$1"; }
fail() { printf 'FAIL: %s\n' "$1"; fails=$((fails + 1)); }
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

# unpack SOURCE DIR: a folder of the sources, for the mutants.
unpack() {
  mkdir -p "$2"
  if [ -d "$1" ]; then cp -a "$1/." "$2"; else tar -xf "$1" -C "$2" --strip-components=1; fi
}

# source_version SOURCE: the NVIDIA_VERSION its version.mk declares.
source_version() {
  if [ -d "$1" ]; then cat "$1/version.mk"; else tar -xOf "$1" --wildcards '*/version.mk'; fi 2>/dev/null |
    sed -n 's/^NVIDIA_VERSION *= *//p' | head -n1
}
oldest=$(awk -F'\t' '$1 == "@oldest" {print $2}' "$(dirname "$build")/edits/manifest.tsv")

# mutant SOURCE DIR FILE SED-SCRIPT WHAT PATTERN: the sources with FILE
# changed by SED-SCRIPT are refused with exit 65 and a last line matching
# PATTERN, and build.json says failed.
mutant() {
  unpack "$1" "$2"
  sed -i "$4" "$2/$3"
  env GDUNLOCK_P2P_APT=0 "$build" --out "$2.out" --source "$2" --no-kernel 2>"$work/stderr"
  local rc=$? last
  last=$(tail -n1 "$work/stderr")
  echo "  mutant ($5): $last"
  [ $rc = 65 ] && grep -q "$6" <<<"$last" && ok "$5 refused by name" || fail "$5: exit $rc: $last"
  [ "$(field "$2.out/build.json" 'd["status"]')" = failed ] || fail "$5: build.json does not say failed"
}

first=1
for s in "${sources[@]}"; do
  name=$(basename "$s")
  out=$work/out-$name sentinel=$work/sentinel-$name
  mkdir -p "$sentinel"
  t0=$(date +%s)
  env HOME="$sentinel" TMPDIR="$sentinel" GDUNLOCK_P2P_APT=0 "$build" --out "$out" --source "$s" --no-kernel \
    >"$work/stdout" 2>"$work/stderr"
  rc=$?
  echo "p2p-build --no-kernel on $name: exit $rc in $(($(date +%s) - t0)) s"
  v=$(source_version "$s")
  if [ "$(printf '%s\n%s\n' "$v" "$oldest" | sort -V | head -n1)" != "$oldest" ]; then
    # Older than the edits are written for: refused, naming an edit and why.
    last=$(tail -n1 "$work/stderr")
    echo "  $last"
    [ $rc = 65 ] && grep -q "^p2p-build: error: edit [a-z0-9-]* does not apply to .* of driver $v: .*older than $oldest" <<<"$last" &&
      ok "$name: older than $oldest, refused by name" || fail "$name: exit $rc: $last"
    [ -z "$(ls -A "$sentinel")" ] || fail "$name: written outside --out: $(ls -A "$sentinel")"
    continue
  fi
  if [ $rc != 0 ]; then
    fail "$name: exit $rc: $(tail -n1 "$work/stderr")"
    continue
  fi
  version=$(field "$out/build.json" 'd["version"]')
  [ "$(field "$out/build.json" 'd["status"]')" = ok ] && ok "$name: build.json says ok" || fail "$name: build.json: $(cat "$out/build.json")"
  applied=$(field "$out/build.json" '" ".join(e["name"] for e in d["edits"] if e["status"] == "applied")')
  echo "  applied: $applied"
  [ -n "$applied" ] && ok "$name: edits applied" || fail "$name: no edit applied"
  patch=$out/gdunlock-p2p-$version.patch
  for e in $applied; do
    f=$(field "$out/build.json" "[e['file'] for e in d['edits'] if e['name'] == '$e'][0]")
    grep -q "^+++ b/$f\$" "$patch" || fail "$name: the patch lacks $f of edit $e"
    case $f in
      src/nvidia/*)
        o=$(ls "$out/source/src/nvidia/_out/"*/"$(basename "${f%.c}").o" 2>/dev/null)
        [ -n "$o" ] || fail "$name: no object compiled for $f"
        ;;
    esac
  done
  ok "$name: the patch and the objects cover the applied edits"
  [ -z "$(ls -A "$sentinel")" ] && ok "$name: nothing written outside --out" ||
    fail "$name: written outside --out: $(ls -A "$sentinel")"
  # The patch replays on the unedited sources (a user reviews and applies it).
  unpack "$s" "$work/replay-$name"
  (cd "$work/replay-$name" && patch -s -p1 --dry-run <"$patch") >/dev/null 2>&1 &&
    ok "$name: the patch applies to the unedited sources" || fail "$name: the patch does not apply to $name"
  rm -rf "$work/replay-$name"

  # Another version asked for: refused before any edit.
  env GDUNLOCK_P2P_APT=0 "$build" --out "$work/other" --source "$s" --version 1.0.0 --no-kernel 2>"$work/stderr"
  rc=$?
  [ $rc = 66 ] && grep -q "sources are of driver $version, the driver here is 1.0.0" "$work/stderr" &&
    ok "$name: a source of another version is refused" || fail "$name: other version: exit $rc: $(tail -n1 "$work/stderr")"

  [ $first = 1 ] || continue
  first=0
  # Mutant 1: the GP100 entry point renamed. Mutant 2: the registry default
  # assigned another way (the shape the edit matches is gone).
  m1=$work/mutant-renamed m2=$work/mutant-shape
  mutant "$s" "$m1" src/nvidia/src/kernel/gpu/bus/arch/pascal/kern_bus_gp100.c \
    's/\bkbusCreateP2PMapping_GP100\b/kbusCreateP2PMappingPascal_GP100/' "renamed function" \
    "edit gp100-bar1-switch .*kbusCreateP2PMapping_GP100.* of driver $version: no match for kbusCreateP2PMapping_GP100"
  mutant "$s" "$m2" src/nvidia/src/kernel/gpu/bif/kernel_bif.c \
    's/p2pOverride = BIF_P2P_NOT_OVERRIDEN;/p2pOverride = ~0U;/' "changed shape" \
    "edit registry-p2p-override does not apply to _kbifInitRegistryOverrides .* of driver $version"

  # Interrupted while compiling: no build.json that says ok. The make on
  # PATH starts 5 s late, so that the signal always lands inside the step
  # (a mutant that fails at once raced the signal and lost: the build had
  # already exited 65). The shell runs its trap when make returns.
  slow=$work/slow-make
  mkdir -p "$slow"
  printf '#!/bin/sh\nsleep 5\nexec %s "$@"\n' "$(command -v make)" >"$slow/make"
  chmod +x "$slow/make"
  stopped=$work/interrupted
  env PATH="$slow:$PATH" GDUNLOCK_P2P_APT=0 "$build" --out "$stopped" --source "$s" --no-kernel \
    2>"$work/stderr" &
  pid=$!
  for _ in $(seq 600); do grep -q 'compiling the edited' "$work/stderr" 2>/dev/null && break; sleep 0.2; done
  kill -TERM $pid
  wait $pid
  rc=$?
  [ $rc = 130 ] && [ "$(field "$stopped/build.json" 'd["status"]')" = failed ] &&
    grep -q 'interrupted' "$stopped/build.json" && ok "an interrupted build says failed" ||
    fail "interrupted: exit $rc: $(tail -n1 "$work/stderr")"
  rm -rf "$stopped" "$slow"
  rm -rf "$m1" "$m2" "$m1.out" "$m2.out"
done

[ $fails = 0 ] || { echo "$fails case(s) failed"; exit 1; }
echo "all cases passed"
