#!/bin/sh
# Checks of the committed SM kernels (src/p2p/p2p_kernels.ptx) with the CUDA
# toolkit of this machine, where there is one (exit 77 = skipped):
#   test_p2p_ptx.sh ptxas PTXAS PTX        ptxas compiles the PTX for every
#       architecture from sm_75 on that this ptxas knows (what the driver's JIT
#       will do on those GPUs); an unknown architecture is skipped, an error fails;
#   test_p2p_ptx.sh current NVCC GEN PTX   the PTX is what p2p_kernels_gen.sh
#       makes of p2p_kernels.cu today, when NVCC is the release that made it.
set -u
mode=$1
case $mode in
ptxas)
  ptxas=$2 ptx=$3 checked=
  for arch in sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_100 sm_103 sm_110 sm_120 sm_121; do
    if out=$("$ptxas" -arch=$arch "$ptx" -o /dev/null 2>&1); then
      checked="$checked $arch"
    elif printf '%s' "$out" | grep -qi "not defined for option\|unsupported gpu architecture\|Value '$arch'"; then
      continue
    else
      echo "ptxas -arch=$arch failed: $out"
      exit 1
    fi
  done
  [ -n "$checked" ] || { echo "ptxas knows none of the architectures"; exit 77; }
  echo "ptxas accepted the PTX for:$checked"
  ;;
current)
  nvcc=$2 gen=$3 ptx=$4
  made=$(grep -m1 "Cuda compilation tools" "$ptx" | sed 's#^// *##')
  have=$("$nvcc" --version | grep -m1 "Cuda compilation tools")
  if [ "$made" != "$have" ]; then
    echo "skipped: the PTX was made by '$made', this nvcc is '$have'"
    exit 77
  fi
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' EXIT
  sh "$gen" "$nvcc" "$tmp" || exit 1
  if ! diff -u "$ptx" "$tmp"; then
    echo "src/p2p/p2p_kernels.ptx is stale: run src/p2p/p2p_kernels_gen.sh"
    exit 1
  fi
  echo "the PTX is current"
  ;;
*)
  echo "usage: test_p2p_ptx.sh ptxas PTXAS PTX | current NVCC GEN PTX"
  exit 2
  ;;
esac
