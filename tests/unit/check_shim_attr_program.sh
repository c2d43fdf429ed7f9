#!/usr/bin/env bash
# check_shim_attr_program.sh PROGRAM FAKE_CUDA_DIR SHIM: the GPU check
# program tests/gpu/shim_attr_check on the fake libcuda (tests/unit/
# fake_libcuda.c), without the shim and with it under the GeForce stand-in
# (GDUNLOCK_TEST_RDMA_ATTR=0). Its PROUTE lines must carry what libcuda and
# the shim wrote for attribute 15 (a cuMemAlloc buffer: 1, or the stand-in's
# 0, in four bytes; memory CUDA does not know: error 1, or 0 from
# cuPointerGetAttributes): the program of 2026-12-01 printed -1 for them all,
# reading the value beside the call that wrote it. Exit 0 pass, 1 fail.
set -euo pipefail
. "$(dirname "$0")/preload_link.sh"
preload_link "$3"
trap 'rm -rf "$preload_dir"' EXIT
prog=$1 fake=$2 shim=$preload
fail() { echo "FAIL: $*"; exit 1; }
want() { # VALUE: the PROUTE lines of both buffers
  for r in dlsym cuGetProcAddress_v2 cuGetProcAddress cuPointerGetAttributes rdma-library; do
    echo "PROUTE $r device $1 bytes=4"
  done
  for r in dlsym cuGetProcAddress_v2 cuGetProcAddress; do echo "PROUTE $r host error 1"; done
  echo "PROUTE cuPointerGetAttributes host 0 bytes=4"
  echo "PROUTE rdma-library host error 1"
}
# No libcudart: that route is not this test's.
plain=$(LD_LIBRARY_PATH=$fake "$prog" /nonexistent/libcudart.so | grep '^PROUTE' || true)
[ "$plain" = "$(want 1)" ] || fail "without the shim: got
$plain
want
$(want 1)"
standin=$(LD_LIBRARY_PATH=$fake LD_PRELOAD=$shim GDUNLOCK_TEST_RDMA_ATTR=0 \
  "$prog" /nonexistent/libcudart.so | grep '^PROUTE' || true)
[ "$standin" = "$(want 0)" ] || fail "under the stand-in: got
$standin
want
$(want 0)"
echo "PASS: shim_attr_check reads attribute 15 after each call: 1 without the shim, 0 under the stand-in, on every route; errors and defaults for unknown memory as libcuda gives them"
