#!/usr/bin/env bash
# GPU checks of RM's lifetime rules the shim depends on (issue 24, items 2
# and 4): shim_rm_lifetime (freeing a VA space once registered with an NV503C,
# unregistered or not, invalidates the NV503C: its handle stays, dead, until
# freed; its objects made in libcuda's order, the GPU's /dev/nvidiaN held open
# first) and uvm_device_p2p (UVM_ALLOC_DEVICE_P2P on a
# cuMemAlloc buffer: the status the 580 source predicts without
# CONFIG_PCI_P2PDMA). Output under $OUT/rm-lifetime.
set -uo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/gdu-gpu-out}
O="$OUT/rm-lifetime"
mkdir -p "$O"
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  echo "SKIP rm-lifetime: no NVIDIA GPU here"
  exit 0
fi
"$BUILD/bin/shim_rm_lifetime" >"$O/lifetime.out" 2>&1
res=$(sed -n 's/^RESULT //p' "$O/lifetime.out")
steps=$(grep '^STATUS case\|^STATUS nv503c-T2' "$O/lifetime.out" | cut -d' ' -f2- | tr '\n' ';')
# The dead handle frees with NV_OK, and its place under the subdevice with it.
freed=$(grep -c '^STATUS case1-free-T1 NV_OK \|^STATUS nv503c-T2 NV_OK ' "$O/lifetime.out")
if [ "$res" = "case1=invalidated case2=alive" ] && [ "$freed" = 2 ]; then
  echo "PASS rm-vaspace-dependency: freeing a VA space once registered with an NV503C (unregistered since) invalidates the NV503C: its controls answer NV_ERR_RESOURCE_LOST and its dead handle keeps a second NV503C out (NV_ERR_STATE_IN_USE) until it is freed (NV_OK), after which a new one is made; a VA space it never had leaves it alive: $steps"
else
  # Every step's status: a refused set-up names its step.
  echo "FAIL rm-vaspace-dependency: ${res:-no result}: $(head -c 1200 "$O/lifetime.out" | tr '\n' ';')"
fi
LD_PRELOAD=$(readlink -f "$BUILD/lib/libgdunlock.so") "$BUILD/bin/uvm_device_p2p" >"$O/p2pdma.out" 2>&1
res=$(sed -n 's/^RESULT //p' "$O/p2pdma.out")
kconf=$( (zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null) | grep -m1 'CONFIG_PCI_P2PDMA')
fds=$(grep '^UVMFD\|^HANDLES' "$O/p2pdma.out" | tr '\n' ';')
if [ "$res" = "NV_ERR_NOT_SUPPORTED (0x56)" ]; then
  echo "PASS uvm-alloc-device-p2p: $res, as uvm_va_range_device_p2p.c:540-541 predicts where the GPU's P2PDMA pages were never made (kernel: ${kconf:-config not readable}): $fds"
else
  echo "FAIL uvm-alloc-device-p2p: ${res:-no result} (want NV_ERR_NOT_SUPPORTED (0x56); kernel: ${kconf:-config not readable}): $fds"
fi
exit 0
