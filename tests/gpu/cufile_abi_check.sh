#!/usr/bin/env bash
# Compares our cuFile declarations (src/cuda/cufile_api.h) with the real
# cufile.h and libcufile on the accelerator machine:
#   1. compiles a small C file against the real header asserting that every
#      size, offset and enum value we declare is the same (needs a C compiler
#      and cufile.h: /usr/local/cuda/include or the nvidia-cufile wheel);
#   2. checks libcufile exports the symbol names our loader resolves.
# Prints PASS/FAIL/SKIP lines for tests/gpu/run.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${GDU_ROOT:-$(cd "$here/../.." && pwd)}
out=${OUT:-/tmp/gdu-gpu-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Folders of the python nvidia-* wheels that hold an include/ or lib/ with
# cuFile or CUDA headers (nvidia/cufile for CUDA 12 wheels, nvidia/cu13 for 13).
wheel_dirs() {
  python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
except Exception:
    raise SystemExit
seen = set()
for root in nvidia.__path__:
    for pat in ("/**/include/cufile.h", "/**/include/cuda.h", "/**/lib/libcufile.so.0"):
        for f in glob.glob(root + pat, recursive=True):
            d = os.path.dirname(os.path.dirname(f))
            if d not in seen:
                seen.add(d)
                print(d)
PY
}

header=""
incs=()
for d in /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include $(wheel_dirs | sed 's|$|/include|'); do
  [ -d "$d" ] || continue
  incs+=("-I$d")
  [ -z "$header" ] && [ -f "$d/cufile.h" ] && header="$d/cufile.h"
done

cc=""
for c in cc gcc clang; do
  command -v "$c" >/dev/null 2>&1 && { cc=$c; break; }
done

if [ -z "$header" ]; then
  echo "SKIP cufile-abi-layout: no cufile.h in /usr/local/cuda/include nor in an nvidia-cufile wheel"
elif [ -z "$cc" ]; then
  echo "SKIP cufile-abi-layout: no C compiler (cc/gcc/clang) on this machine; header at $header"
else
  cat >"$work/abi.c" <<'EOF'
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <cufile.h>
#include "cuda/cufile_api.h"

static int failures;
#define SAME(what, ours, real)                                                              \
    do {                                                                                    \
        long long o_ = (long long)(ours), r_ = (long long)(real);                           \
        if (o_ == r_)                                                                       \
            printf("PASS cufile-abi %s: %lld\n", what, o_);                                 \
        else {                                                                              \
            printf("FAIL cufile-abi %s: ours %lld, cufile.h %lld\n", what, o_, r_);         \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

int main(void)
{
    SAME("sizeof CUfileError_t", sizeof(gdu_CUfileError), sizeof(CUfileError_t));
    SAME("offsetof CUfileError_t.cu_err", offsetof(gdu_CUfileError, cu_err), offsetof(CUfileError_t, cu_err));
    SAME("sizeof CUfileDescr_t", sizeof(gdu_CUfileDescr), sizeof(CUfileDescr_t));
    SAME("offsetof CUfileDescr_t.handle", offsetof(gdu_CUfileDescr, handle), offsetof(CUfileDescr_t, handle));
    SAME("offsetof CUfileDescr_t.fs_ops", offsetof(gdu_CUfileDescr, fs_ops), offsetof(CUfileDescr_t, fs_ops));
    SAME("sizeof CUfileHandle_t", sizeof(gdu_CUfileHandle), sizeof(CUfileHandle_t));
    SAME("sizeof CUfileDrvProps_t", sizeof(gdu_CUfileDrvProps), sizeof(CUfileDrvProps_t));
    SAME("offsetof nvfs.minor_version", offsetof(gdu_CUfileDrvProps, nvfs.minor_version), offsetof(CUfileDrvProps_t, nvfs.minor_version));
    SAME("offsetof nvfs.poll_thresh_size", offsetof(gdu_CUfileDrvProps, nvfs.poll_thresh_size), offsetof(CUfileDrvProps_t, nvfs.poll_thresh_size));
    SAME("offsetof nvfs.max_direct_io_size", offsetof(gdu_CUfileDrvProps, nvfs.max_direct_io_size), offsetof(CUfileDrvProps_t, nvfs.max_direct_io_size));
    SAME("offsetof nvfs.dstatusflags", offsetof(gdu_CUfileDrvProps, nvfs.dstatusflags), offsetof(CUfileDrvProps_t, nvfs.dstatusflags));
    SAME("offsetof nvfs.dcontrolflags", offsetof(gdu_CUfileDrvProps, nvfs.dcontrolflags), offsetof(CUfileDrvProps_t, nvfs.dcontrolflags));
    SAME("offsetof fflags", offsetof(gdu_CUfileDrvProps, fflags), offsetof(CUfileDrvProps_t, fflags));
    SAME("offsetof max_device_cache_size", offsetof(gdu_CUfileDrvProps, max_device_cache_size), offsetof(CUfileDrvProps_t, max_device_cache_size));
    SAME("offsetof max_device_pinned_mem_size", offsetof(gdu_CUfileDrvProps, max_device_pinned_mem_size), offsetof(CUfileDrvProps_t, max_device_pinned_mem_size));
    SAME("offsetof max_batch_io_size", offsetof(gdu_CUfileDrvProps, max_batch_io_size), offsetof(CUfileDrvProps_t, max_batch_io_size));
    SAME("offsetof max_batch_io_timeout_msecs", offsetof(gdu_CUfileDrvProps, max_batch_io_timeout_msecs), offsetof(CUfileDrvProps_t, max_batch_io_timeout_msecs));
    SAME("CU_FILE_HANDLE_TYPE_OPAQUE_FD", GDU_CU_FILE_HANDLE_TYPE_OPAQUE_FD, CU_FILE_HANDLE_TYPE_OPAQUE_FD);
    SAME("CU_FILE_NVME_SUPPORTED", GDU_CU_FILE_NVME_SUPPORTED, CU_FILE_NVME_SUPPORTED);
    SAME("CU_FILE_ALLOW_COMPAT_MODE", GDU_CU_FILE_ALLOW_COMPAT_MODE, CU_FILE_ALLOW_COMPAT_MODE);
#define OPERR(n) SAME(#n, GDU_##n, n)
    OPERR(CU_FILE_SUCCESS);
    OPERR(CU_FILE_DRIVER_NOT_INITIALIZED);
    OPERR(CU_FILE_DRIVER_INVALID_PROPS);
    OPERR(CU_FILE_DRIVER_UNSUPPORTED_LIMIT);
    OPERR(CU_FILE_DRIVER_VERSION_MISMATCH);
    OPERR(CU_FILE_DRIVER_VERSION_READ_ERROR);
    OPERR(CU_FILE_DRIVER_CLOSING);
    OPERR(CU_FILE_PLATFORM_NOT_SUPPORTED);
    OPERR(CU_FILE_IO_NOT_SUPPORTED);
    OPERR(CU_FILE_DEVICE_NOT_SUPPORTED);
    OPERR(CU_FILE_NVFS_DRIVER_ERROR);
    OPERR(CU_FILE_CUDA_DRIVER_ERROR);
    OPERR(CU_FILE_CUDA_POINTER_INVALID);
    OPERR(CU_FILE_CUDA_MEMORY_TYPE_INVALID);
    OPERR(CU_FILE_CUDA_POINTER_RANGE_ERROR);
    OPERR(CU_FILE_CUDA_CONTEXT_MISMATCH);
    OPERR(CU_FILE_INVALID_MAPPING_SIZE);
    OPERR(CU_FILE_INVALID_MAPPING_RANGE);
    OPERR(CU_FILE_INVALID_FILE_TYPE);
    OPERR(CU_FILE_INVALID_FILE_OPEN_FLAG);
    OPERR(CU_FILE_DIO_NOT_SET);
    OPERR(CU_FILE_INVALID_VALUE);
    OPERR(CU_FILE_MEMORY_ALREADY_REGISTERED);
    OPERR(CU_FILE_MEMORY_NOT_REGISTERED);
    OPERR(CU_FILE_PERMISSION_DENIED);
    OPERR(CU_FILE_DRIVER_ALREADY_OPEN);
    OPERR(CU_FILE_HANDLE_NOT_REGISTERED);
    OPERR(CU_FILE_HANDLE_ALREADY_REGISTERED);
    OPERR(CU_FILE_DEVICE_NOT_FOUND);
    OPERR(CU_FILE_INTERNAL_ERROR);
    OPERR(CU_FILE_GETNEWFD_FAILED);
    OPERR(CU_FILE_NVFS_SETUP_ERROR);
    OPERR(CU_FILE_IO_DISABLED);
    OPERR(CU_FILE_BATCH_SUBMIT_FAILED);
    OPERR(CU_FILE_GPU_MEMORY_PINNING_FAILED);
    OPERR(CU_FILE_BATCH_FULL);
    OPERR(CU_FILE_ASYNC_NOT_SUPPORTED);
    return failures ? 1 : 0;
}
EOF
  if "$cc" -std=c11 -D_GNU_SOURCE -Wall -I"$root/src" "${incs[@]}" "$work/abi.c" -o "$work/abi" \
       >"$work/cc.log" 2>&1; then
    "$work/abi"
    echo "PASS cufile-abi-compile: our layouts compiled against $header"
  else
    echo "FAIL cufile-abi-compile: $cc could not build the check against $header: $(head -c 600 "$work/cc.log" | tr '\n' ' ')"
  fi
fi

# 2. Exported names, from the library our loader would pick.
lib=""
if [ -n "${GDUNLOCK_LIBCUFILE:-}" ]; then
  lib=$GDUNLOCK_LIBCUFILE
else
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(wheel_dirs | sed 's|$|/lib|'); do
    [ -e "$d/libcufile.so.0" ] && { lib="$d/libcufile.so.0"; break; }
  done
  [ -z "$lib" ] && lib=$(ldconfig -p 2>/dev/null | awk '/libcufile\.so\.0 /{print $NF; exit}')
fi
if [ -z "$lib" ]; then
  echo "SKIP cufile-abi-symbols: libcufile.so.0 not found"
  exit 0
fi
syms=""
if command -v nm >/dev/null 2>&1; then
  syms=$(nm -D --defined-only "$lib" 2>/dev/null | awk '{print $NF}')
else
  syms=$(python3 - "$lib" <<'PY' 2>/dev/null
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
for n in ("cuFileDriverOpen", "cuFileDriverClose", "cuFileDriverClose_v2", "cuFileDriverGetProperties",
          "cuFileHandleRegister", "cuFileHandleDeregister", "cuFileBufRegister", "cuFileBufDeregister",
          "cuFileRead", "cuFileWrite", "cuFileGetVersion", "cuFileDriverOpen_v2"):
    try:
        getattr(lib, n); print(n)
    except AttributeError:
        pass
PY
)
fi
missing=""
for s in cuFileDriverOpen cuFileDriverGetProperties cuFileHandleRegister cuFileHandleDeregister \
         cuFileBufRegister cuFileBufDeregister cuFileRead cuFileWrite; do
  grep -qx "$s" <<<"$syms" || missing="$missing $s"
done
if [ -z "$missing" ]; then
  echo "PASS cufile-abi-symbols: $lib exports every required name"
else
  echo "FAIL cufile-abi-symbols: $lib lacks$missing"
fi
for s in cuFileDriverClose_v2 cuFileDriverClose cuFileGetVersion cuFileDriverOpen_v2; do
  if grep -qx "$s" <<<"$syms"; then echo "INFO cufile-abi-symbols: exports $s"; else echo "INFO cufile-abi-symbols: no $s"; fi
done
if grep -qx cuFileDriverClose_v2 <<<"$syms" || grep -qx cuFileDriverClose <<<"$syms"; then
  echo "PASS cufile-abi-close: a driver close symbol exists"
else
  echo "FAIL cufile-abi-close: neither cuFileDriverClose_v2 nor cuFileDriverClose exported"
fi
