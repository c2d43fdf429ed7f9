#!/usr/bin/env bash
# The version matrix of the BAR1 P2P edits (issue 53): for each NVIDIA open
# kernel module release, run p2p-build --no-kernel (edits applied or refused
# with the reason, the edited RM core objects compiled) and, where a fork
# keeps a branch of that version, compare what its edited functions do with
# what ours do. Prints a Markdown table on stdout; progress on stderr.
#
# Usage: scripts/p2p-matrix.sh CLONE [--from VER] [--all] [--work DIR]
#          [--source TARBALL]... [--fork NAME=CLONE]...
#   CLONE            a git clone of NVIDIA/open-gpu-kernel-modules (its tags)
#   --from VER       the oldest release to take (default 550.54.15)
#   --all            build every release; by default a release whose edited
#                    files are the same git blobs as an earlier one's reports
#                    that release's result instead of building again
#   --source FILE    also build this source tarball (e.g. a Debian .orig.tar.xz)
#   --fork NAME=CLONE  a fork's clone; its branches named VER-p2p are compared
#   --work DIR       scratch folder (default: a new one under TMPDIR, removed)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/src/unlock/p2p-build

clone=${1:?usage: scripts/p2p-matrix.sh CLONE [--from VER] [--all] [--source TARBALL]... [--fork NAME=CLONE]...}
shift
from=550.54.15 all=0 work= sources=() forks=()
while [ $# -gt 0 ]; do
  case $1 in
    --from) from=$2; shift 2 ;;
    --all) all=1; shift ;;
    --work) work=$2; shift 2 ;;
    --source) sources+=("$2"); shift 2 ;;
    --fork) forks+=("$2"); shift 2 ;;
    *) echo "p2p-matrix: unknown argument $1" >&2; exit 64 ;;
  esac
done
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"

edited_files=$(awk -F'\t' '!/^[#@]/ && NF {print $2}' "$here/src/unlock/edits/manifest.tsv" | sort -u)

# ---- what a tree's edited functions do (ours after the edits, or a fork's) ----
# Each probe prints a short word; the fork comparison sets them side by side.
body() { # body FILE FUNCTION: the function's definition, comments removed
  FN=$2 perl -0ne '
    s{/\*.*?\*/}{}gs; s{//[^\n]*}{}g;
    if (/^((?:[A-Za-z_][\w ]*[ *])?\Q$ENV{FN}\E\s*\([^;{]*\)\s*\{.*?^\})/ms) { print $1 }' "$1" 2>/dev/null
}
probe_hal() { # the default (non-Hopper) binding of the five BAR1 P2P entries
  local t=$1/src/nvidia/generated/g_kern_bus_nvoc.c m impls=
  for m in kbusGetBar1P2PDmaInfo kbusCreateP2PMappingForBar1P2P kbusRemoveP2PMappingForBar1P2P \
    kbusHasPcieBar1P2PMapping kbusIsPcieBar1P2PMappingSupported; do
    impls+=" $(grep -o "__${m}__ = &${m}_[A-Za-z0-9]*" "$t" | tail -n1 | sed "s/.*&${m}_//")"
  done
  case $impls in *[a-f0-9][a-f0-9][a-f0-9][a-f0-9][a-f0-9][a-f0-9]*) echo "stubs" ;; *) echo "GH100" ;; esac
}
probe_static() { # how pre-Hopper chips get static BAR1
  local t=$1
  if grep -q 'kbusEnableStaticBar1Mapping_TU102' "$t/src/nvidia/generated/g_kern_bus_nvoc.c" "$t/src/nvidia/generated/g_kern_bus_nvoc.h" 2>/dev/null; then
    echo "upstream(TU102)"
  elif [ "$(grep -o '__kbusEnableStaticBar1Mapping__ = &kbusEnableStaticBar1Mapping_[A-Za-z0-9]*' "$t/src/nvidia/generated/g_kern_bus_nvoc.c" | tail -n1 | sed 's/.*_//')" = GH100 ]; then
    echo "table->GH100"
  elif body "$t/src/nvidia/src/kernel/gpu/bus/arch/maxwell/kern_bus_gm107.c" kbusInitBar1_GM107 | grep -q 'kbusEnableStaticBar1Mapping_GH100'; then
    echo "call->GH100"
  else
    echo "none"
  fi
}
probe_aperture() { # the static BAR1 shortcut of _kbusMapAperture_GM107
  local b
  b=$(body "$1/src/nvidia/src/kernel/gpu/bus/arch/maxwell/kern_bus_gm107.c" _kbusMapAperture_GM107)
  if grep -q "kbusIsStaticBar1Enabled" <<<"$b"; then echo "shortcut"; else echo "no shortcut"; fi
}
probe_gp100() {
  if body "$1/src/nvidia/src/kernel/gpu/bus/arch/pascal/kern_bus_gp100.c" kbusCreateP2PMapping_GP100 | grep -q '_PCIE_BAR1'; then
    body "$1/src/nvidia/src/kernel/gpu/bus/arch/pascal/kern_bus_gp100.c" kbusCreateP2PMapping_GP100 |
      grep -o 'kbusCreateP2PMappingForBar1P2P_[A-Z0-9]*' | head -n1 | sed 's/.*_/BAR1->/'
  else
    echo "no-BAR1"
  fi
}
probe_registry() {
  local b
  b=$(body "$1/src/nvidia/src/kernel/gpu/bif/kernel_bif.c" _kbifInitRegistryOverrides | tr -s ' \n' ' ')
  local o f p
  o=$(grep -o 'p2pOverride = [^;]*' <<<"$b" | head -n1 | sed 's/p2pOverride = //')
  f=$(grep -o 'forceP2PType = NV_REG[^;]*' <<<"$b" | head -n1 | sed 's/.*FORCE_P2P_TYPE_//')
  p=$(grep -o 'pcieP2PType = NV_REG[^;]*' <<<"$b" | head -n1 | sed 's/.*PCIEP2P_TYPE_//')
  case $o in BIF_P2P_NOT_OVERRIDEN) o=none ;; 0x11 | *_READ*_ENABLE*_WRITE*_ENABLE*) o=read+write ;; esac
  echo "override=$o,force=$f${p:+,pcie=$p}"
}
probe_rebar() {
  if body "$1/kernel-open/nvidia/nv-pci.c" nv_resize_pcie_bars | grep -q 'NVreg_EnableResizableBar'; then
    echo "gated"
  else
    echo "always"
  fi
}
probe_ptes() { # how UVM's PTEs reach a BAR1 peer
  local b
  b=$(body "$1/src/nvidia/src/kernel/rmapi/nv_gpu_ops.c" nvGpuOpsBuildExternalAllocPtes)
  if grep -q 'isBar1P2PSupported' <<<"$b"; then echo "upstream(BAR1 DMA info)"
  elif grep -q 'gdunlockBar1Peer' <<<"$b"; then echo "sysmem@BAR1 DMA info"
  elif grep -q 'bar1BusAddr' <<<"$b"; then echo "sysmem@BAR1 bus address"
  else echo "peer"; fi
}
probe_gmmu() {
  if body "$1/src/nvidia/src/libraries/mmu/gmmu_fmt.c" gmmuFmtPtePhysAddrFld | tr -d ' \n' |
    grep -q 'caseGMMU_APERTURE_PEER:return&pPte->fldAddrSysmem\|caseGMMU_APERTURE_NONCOH:caseGMMU_APERTURE_PEER:return&pPte->fldAddrSysmem\|caseGMMU_APERTURE_SYS_NONCOH:caseGMMU_APERTURE_PEER:return&pPte->fldAddrSysmem'; then
    echo "peer->sysmem field"
  else
    echo "unchanged"
  fi
}
probes=(rebar registry static aperture hal gp100 ptes gmmu)
why_differs() { # the reason for a known difference, by probe
  case $1 in
    rebar) echo "both let BAR1 grow; the fork comments the test out, the edit drops it" ;;
    registry) echo "same defaults; the edit spells ForceP2P's value by its fields (READ|WRITE ENABLE)" ;;
    static) echo "the fork calls the *_GH100 functions from kbusInitBar1_GM107; the edit rebinds the table entries, whose one caller that is" ;;
    aperture) echo "" ;;
    hal) echo "the fork's 550/560 branches call *_GH100 directly from p2p_api.c and kern_bus_gh100.c; the edit rebinds the table, which those calls go through" ;;
    gp100) echo "the fork calls *_GH100 where the table is not rebound; the edit calls the HAL, which the table binds to GH100" ;;
    ptes) echo "the fork writes the peer's BAR1 bus address (no IOMMU mapping); the edit asks kbusGetBar1P2PDmaInfo, as NVIDIA's 580.65.06 does, and only for peers joined by BAR1 P2P" ;;
    gmmu) echo "the fork sends every peer PTE to the sysmem address field (NVLink peers too); the edit does it in UVM's PTEs of BAR1 peers only" ;;
  esac
}

# ---- the releases ---------------------------------------------------------------
versions=$(git -C "$clone" for-each-ref --format='%(refname:short)' refs/tags | grep -E '^[0-9]+\.[0-9]+(\.[0-9]+)?$' |
  sort -V | sed -n "/^${from//./\\.}\$/,\$p")
[ -n "$versions" ] || { echo "p2p-matrix: no tag $from or later in $clone" >&2; exit 66; }

declare -A by_key=() result=() applied=() notneeded=() secs=() refusal=()
run_build() { # run_build LABEL SOURCE: p2p-build --no-kernel, its result recorded under LABEL
  local label=$1 srcarg=$2 o=$work/out-$1 t0 t1 rc=0
  rm -rf "$o"
  t0=$(date +%s.%N)
  GDUNLOCK_P2P_APT=0 "$build" --out "$o" --source "$srcarg" --no-kernel 2>"$work/stderr-$label" || rc=$?
  t1=$(date +%s.%N)
  secs[$label]=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", b - a}')
  if [ $rc = 0 ]; then
    result[$label]="built"
  else
    result[$label]="refused (exit $rc)"
    refusal[$label]=$(tail -n1 "$work/stderr-$label" | sed 's/^p2p-build: error: //; s/|/\\|/g')
  fi
  applied[$label]=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(", ".join(e["name"] for e in d["edits"] if e["status"]=="applied"))' "$o/build.json" 2>/dev/null || echo "?")
  notneeded[$label]=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(", ".join(e["name"] for e in d["edits"] if e["status"]=="not-needed"))' "$o/build.json" 2>/dev/null || echo "?")
  echo "p2p-matrix: $label: ${result[$label]} in ${secs[$label]} s" >&2
}

rows=()
for v in $versions; do
  key=$(for f in $edited_files; do git -C "$clone" rev-parse "$v:$f" 2>/dev/null || echo none; done | sha1sum | cut -c1-12)
  if [ $all = 0 ] && [ -n "${by_key[$key]:-}" ]; then
    rows+=("$v|=${by_key[$key]}")
    echo "p2p-matrix: $v: same edited files as ${by_key[$key]}" >&2
    continue
  fi
  by_key[$key]=$v
  rm -rf "$work/src-$v" && mkdir -p "$work/src-$v"
  git -C "$clone" archive "$v" | tar -x -C "$work/src-$v"
  run_build "$v" "$work/src-$v"
  rows+=("$v|")
  rm -rf "$work/src-$v"
done
for s in "${sources[@]}"; do
  label=$(tar -xOf "$s" --wildcards '*/version.mk' 2>/dev/null | sed -n 's/^NVIDIA_VERSION *= *//p' | head -n1)
  label=${label:-$(basename "$s")}
  run_build "$label" "$s"
  rows+=("$label|tarball $(basename "$s")")
done

# ---- the table ---------------------------------------------------------------------
echo "| version | result | edits applied | not needed (upstream has it, or another edit does) | time (s) |"
echo "| --- | --- | --- | --- | --- |"
for r in "${rows[@]}"; do
  v=${r%%|*} note=${r#*|}
  case $note in
    =*) echo "| $v | as ${note#=} (the edited files are the same git blobs) | | | |" ;;
    *)
      res=${result[$v]} done_edits=${applied[$v]}
      [ -n "${refusal[$v]:-}" ] && res="$res: ${refusal[$v]}" && done_edits="none (stopped after: $done_edits)"
      [ -n "$note" ] && res="$res ($note)"
      echo "| $v | $res | $done_edits | ${notneeded[$v]} | ${secs[$v]} |"
      ;;
  esac
done

# ---- the fork comparison -----------------------------------------------------------
[ ${#forks[@]} -gt 0 ] || exit 0
echo
echo "Fork branches seen: $(for f in "${forks[@]}"; do
  n=${f%%=*} c=${f#*=}
  printf '%s: %s; ' "$n" "$(git -C "$c" for-each-ref --format='%(refname:lstrip=2)' refs/heads | grep -- '-p2p$' | sort -V | paste -sd' ' -)"
done)"
echo
echo "| version | fork | what | fork | this project | verdict |"
echo "| --- | --- | --- | --- | --- | --- |"
for f in "${forks[@]}"; do
  n=${f%%=*} c=${f#*=}
  for br in $(git -C "$c" for-each-ref --format='%(refname:lstrip=2)' refs/heads | grep -- '-p2p$' | sort -V); do
    v=${br%-p2p}
    git -C "$clone" rev-parse -q --verify "refs/tags/$v" >/dev/null || continue
    echo "p2p-matrix: comparing $n $br" >&2
    ft=$work/fork-$n-$v ours=$work/out-$v/source
    rm -rf "$ft" && mkdir -p "$ft"
    git -C "$c" archive "refs/heads/$br" | tar -x -C "$ft"
    # Our edited tree of that release, from the table's run or built now.
    if ! [ -f "$work/out-$v/build.json" ]; then
      rm -rf "$work/src-$v" && mkdir -p "$work/src-$v"
      git -C "$clone" archive "$v" | tar -x -C "$work/src-$v"
      run_build "$v" "$work/src-$v"
      rm -rf "$work/src-$v"
    fi
    if [ "${result[$v]:-}" != built ]; then
      echo "| $v | $n | (our build refused: see the table above) | | | |"
      continue
    fi
    for p in "${probes[@]}"; do
      a=$("probe_$p" "$ft") b=$("probe_$p" "$ours")
      if [ "$a" = "$b" ]; then verdict="agree"; else verdict="differ: $(why_differs "$p")"; fi
      echo "| $v | $n | $p | $a | $b | $verdict |"
    done
    rm -rf "$ft"
  done
done
