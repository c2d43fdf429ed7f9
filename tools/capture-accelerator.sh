#!/usr/bin/env bash
# Gathers the facts about an accelerator machine that the project's fixtures
# and ABI checks are built from, into $OUT/accel-facts.txt (plus the real
# cufile.h when the toolkit has one).
set -uo pipefail
OUT=${OUT:-/tmp/gdu-facts}
mkdir -p "$OUT"
f=$OUT/accel-facts.txt
run() { echo "### $*"; "$@" 2>&1; echo; }
{
  run date -u
  run uname -a
  run cat /proc/driver/nvidia/version
  run cat /sys/module/nvidia_uvm/version
  run cat /sys/module/nvidia/version
  run nvidia-smi -q
  run nvidia-smi topo -m
  run sh -c 'for g in /proc/driver/nvidia/gpus/*; do echo $g; cat $g/information; done'
  run cat /proc/driver/nvidia/params
  run sh -c 'ls -la /dev/nvidia* /proc/driver/nvidia-fs 2>&1'
  run sh -c 'for d in /sys/bus/pci/devices/*; do echo "$d $(cat $d/vendor $d/device $d/class | tr "\n" " ") $(cat $d/current_link_speed $d/current_link_width $d/max_link_speed $d/max_link_width 2>/dev/null | tr "\n" " ")"; done'
  run sh -c 'for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor)" = 0x10de ] && { echo $d; cat $d/resource; readlink -f $d; stat -c %s $d/config; }; done'
  run sh -c 'ls /sys/kernel/iommu_groups/ 2>&1 | head; cat /sys/kernel/iommu_groups/*/type 2>&1 | sort | uniq -c'
  run cat /proc/cmdline
  run cat /proc/mounts
  run lsblk -O
  run sh -c 'ls -la /run/udev/data 2>&1 | head -20'
  run cat /etc/cufile.json
  run sh -c 'ls -la /usr/local/cuda/lib64/ | grep -i cufile; ls /usr/local/cuda/gds 2>&1; find / -name "libcufile*.so*" -not -path "/proc/*" 2>/dev/null'
  run sh -c 'nm -D --defined-only $(find / -name "libcufile.so*" -not -path "/proc/*" 2>/dev/null | head -1) | grep -i " T cuFile"'
  run python3 -c 'import torch, safetensors, sys; print(sys.version, torch.__version__, torch.version.cuda, safetensors.__version__, torch.cuda.device_count())'
  run nproc
  run free -g
  run df -h / /tmp /dev/shm
} >"$f" 2>&1
cp /usr/local/cuda/include/cufile.h "$OUT/" 2>/dev/null || find / -name cufile.h -not -path "/proc/*" -exec cp {} "$OUT/" \; 2>/dev/null
echo "facts in $f"
