#!/usr/bin/env bash
# check_replace_file.sh SOURCE_DIR: scripts/replace-file.cmake, which
# bundle-runtime copies the build's libraries with, never lets the
# destination's name show part of a file. A bundled library that gdunlock
# loaded while only part of it was written killed it with SIGBUS (exit 135)
# in the build's man-page step. Checked:
#   1. while a 128 MiB file is copied, the destination is absent or whole at
#      every look (a copy written in place shows it growing);
#   2. no scratch file is left; a second run with the same content leaves the
#      destination's inode alone (the build stays incremental); new content
#      replaces it, readable whole.
# Exit 0 pass, 1 fail.
set -euo pipefail
script=$(realpath "$1")/scripts/replace-file.cmake
top=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock-replace-XXXXXX")
trap 'rm -rf "$top"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

size=$((128 << 20))
head -c "$size" /dev/urandom >"$top/src"
cmake -DSRC="$top/src" -DDST="$top/out/dst" -P "$script" &
copier=$!
looks=0 partial=""
while kill -0 "$copier" 2>/dev/null; do
  if seen=$(stat -c %s "$top/out/dst" 2>/dev/null) && [ "$seen" != "$size" ]; then
    partial="$seen"
    break
  fi
  looks=$((looks + 1))
done
wait "$copier" || fail "cmake -P replace-file.cmake exited $?"
[ -z "$partial" ] || fail "the destination showed $partial of $size bytes while it was copied"
cmp -s "$top/src" "$top/out/dst" || fail "the destination differs from the source"
[ -z "$(find "$top/out" -name '*.part')" ] || fail "scratch files left: $(ls -a "$top/out")"

inode=$(stat -c %i "$top/out/dst")
cmake -DSRC="$top/src" -DDST="$top/out/dst" -P "$script"
[ "$(stat -c %i "$top/out/dst")" = "$inode" ] || fail "the same content was written again"
head -c 4096 /dev/urandom >"$top/src2"
cmake -DSRC="$top/src2" -DDST="$top/out/dst" -P "$script"
cmp -s "$top/src2" "$top/out/dst" || fail "new content did not replace the destination"
echo "PASS: copied whole through a rename ($looks looks during the copy), left alone when equal, replaced when not"
