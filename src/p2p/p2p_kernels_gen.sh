#!/bin/sh
# Regenerates p2p_kernels.ptx from p2p_kernels.cu (run from anywhere; needs
# nvcc). Usage: p2p_kernels_gen.sh [NVCC] [OUT]
#   - target compute_75 (Turing), the oldest architecture CUDA 13 supports;
#     the driver JIT-compiles the PTX for newer GPUs (sm_80, sm_90, ...);
#   - the .version line is lowered to PTX ISA 6.3, the first ISA that knows
#     sm_75, so that drivers older than the nvcc that generated it (which
#     writes its own newest ISA) load it too. The kernels use no instruction
#     newer than that; ptxas checks it for every target (test_p2p_ptx_ptxas).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${1:-nvcc}
out=${2:-$here/p2p_kernels.ptx}
tmp=$out.tmp.$$
"$nvcc" -ptx -arch=compute_75 -I "$here/.." -o "$tmp" "$here/p2p_kernels.cu"
sed 's/^\.version [0-9.]*$/.version 6.3/' "$tmp" >"$out"
rm -f "$tmp"
