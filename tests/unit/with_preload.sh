#!/bin/sh
# with_preload.sh SHIM CMD ARGS...: runs CMD with SHIM preloaded, from any
# build folder (see preload_link.sh); exits with CMD's status.
. "$(dirname "$0")/preload_link.sh"
preload_link "$1" || exit 70
shift
LD_PRELOAD=$preload "$@"
rc=$?
rm -rf "$preload_dir"
exit $rc
