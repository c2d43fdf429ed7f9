#!/usr/bin/env bash
# GPU check of issue 22 item 1 (run by tests/gpu/run.sh load_files): a shard
# replaced by rename after the checkpoint was opened is not what the GPU load
# reads: the pipeline with O_DIRECT reads the validated file; cuFile, which
# opens a file again by its name, refuses it saying so, and reads a shard
# that was only renamed (compat mode needs udev's entry for the file system
# under $GDU_LOAD_DIR: written here when missing, removed at the end; needs
# root). 64 MiB of files in $GDU_LOAD_DIR/files (default /var/tmp/gdu-load:
# a disk), a few seconds.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${GDU_ROOT:-$(cd "$here/../.." && pwd)}
export BUILD=${BUILD:-$root/build}
py=${PYTHON:-python3}
dir=${GDU_LOAD_DIR:-/var/tmp/gdu-load}/files
if ! "$py" -c "import torch, safetensors" 2>/dev/null; then
  echo "SKIP load-files: $py lacks torch or safetensors"
  exit 0
fi
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$dir"
# shellcheck source=udev_root.sh
. "$here/udev_root.sh"
udev_root_setup "$dir" || echo "INFO udev: no entry written: cuFile will refuse the files (5027)"
trap udev_root_remove EXIT
GDUNLOCK_IO_BACKEND=pipeline GDUNLOCK_IO_DIRECT=on "$py" "$here/load_files.py" --dir "$dir"
GDUNLOCK_IO_BACKEND=cufile "$py" "$here/load_files.py" --dir "$dir"
exit 0
