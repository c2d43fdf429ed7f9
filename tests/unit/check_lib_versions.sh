#!/usr/bin/env bash
# check_lib_versions.sh LOADER SHIM: the symbol versions of the two libraries.
# Every call of libgdunlock-load.so.0 is in a GDUNLOCK_LOAD_* node and the
# shim's own calls in a GDUNLOCK_SHIM_* node, so that programs record what
# they need; the calls the shim stands in front of (ioctl, close, dlsym,
# cuGetProcAddress, ...) are in none: the dynamic linker binds a program's
# versioned reference (ioctl@GLIBC_2.2.5) to a preloaded library's
# definition only when that one is unversioned (src/shim/exports.map).
set -euo pipefail
loader=$1
shim=$2
status=0
bad() { echo "FAIL: $*"; status=1; }

# "version name" of each function the library defines and exports.
defined() { objdump -T "$1" | awk '$2 == "g" && $4 == ".text" {print $(NF - 1), $NF}' | sort -u; }

loader_count=0
while read -r version name; do
  loader_count=$((loader_count + 1))
  [[ $version == GDUNLOCK_LOAD_* ]] || bad "$loader: $name has version '$version', not a GDUNLOCK_LOAD_ node"
done < <(defined "$loader")
[ $loader_count -gt 0 ] || bad "$loader exports no function"
# A call keeps the node of the release that added it: a program linked
# against 0.1 finds gdu_io_submit@GDUNLOCK_LOAD_0.1 in every later release.
for pair in "GDUNLOCK_LOAD_0.1 gdu_io_submit" "GDUNLOCK_LOAD_0.1 gdu_io_extents_box" \
    "GDUNLOCK_LOAD_0.1 gdu_st_load" "GDUNLOCK_LOAD_0.2 gdu_io_submit_box" \
    "GDUNLOCK_LOAD_0.3 gdu_io_submit_box_deferred" "GDUNLOCK_LOAD_0.3 gdu_io_place" \
    "GDUNLOCK_LOAD_0.4 gdu_io_defaults_set"; do
  defined "$loader" | grep -qx "$pair" || bad "$loader: no ${pair#* } in ${pair% *}"
done

own=0 interposed=0
while read -r version name; do
  if [[ $name == gdunlock_* ]]; then
    own=$((own + 1))
    [[ $version == GDUNLOCK_SHIM_* ]] || bad "$shim: $name has version '$version', not a GDUNLOCK_SHIM_ node"
  else
    interposed=$((interposed + 1))
    [ "$version" = Base ] || bad "$shim: $name has version '$version': a versioned definition does not interpose a program's $name"
  fi
done < <(defined "$shim")
for name in ioctl close dlsym cuGetProcAddress cuFileBufRegister; do
  defined "$shim" | grep -q " $name\$" || bad "$shim does not export $name"
done
[ $own -gt 0 ] || bad "$shim exports no gdunlock_* call"
[ $status = 0 ] && echo "PASS: $loader_count loader calls in GDUNLOCK_LOAD_ nodes; the shim's $own own calls in GDUNLOCK_SHIM_, its $interposed interposed calls unversioned"
exit $status
