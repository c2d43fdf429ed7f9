#!/usr/bin/env bash
# check_rm_calls.sh ARCHIVE: in the RM layer's archive only rm_kernel.c's
# object takes ioctl or close by name; every other call on the client's file
# goes through the calls its user hands in (rm/rm_client.h). Linked into the
# shim, which exports both, a call by name would reach the shim's own.
set -euo pipefail
archive=$1
# Undefined ioctl and close, one "object symbol" a line.
taken=$(nm -A "$archive" | awk '$(NF-1) == "U" && ($NF == "ioctl" || $NF == "close") {
    n = split($(NF - 2), part, ":"); print part[n - 1], $NF }')
byname=$(echo "$taken" | awk '$1 != "rm_kernel.c.o" && NF {print $1}' | sort -u)
if [ -n "$byname" ]; then
    echo "FAIL: objects of $archive call ioctl or close by name:" $byname
    exit 1
fi
case $taken in
*"rm_kernel.c.o ioctl"*) ;;
*) echo "FAIL: rm_kernel.c's object no longer takes ioctl: is the check still looking?"; exit 1 ;;
esac
echo "PASS: only rm_kernel.c calls ioctl and close in $archive"
