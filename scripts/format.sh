#!/usr/bin/env bash
# The C sources in the house style (.clang-format).
#   scripts/format.sh           reformat every tracked .c and .h in place
#   scripts/format.sh --check   change nothing; list the files not in the style
#                               and exit 1 if there are any (what CI runs)
# The tree is kept formatted by clang-format 14 (Debian 12). Another major
# version lays out a few constructs differently, so there the check reports
# but does not fail: a reformatting by a newer tool is not a defect.
set -euo pipefail
cd "$(dirname "$0")/.."
want_major=14
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 69; }
major=$(clang-format --version | sed -nE 's/.*version ([0-9]+).*/\1/p')
mapfile -t files < <(git ls-files '*.c' '*.h')
if [ "${1:-}" != "--check" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" 2>/dev/null || bad+=("$f")
done
if [ ${#bad[@]} -eq 0 ]; then
  echo "format: all ${#files[@]} C files in the house style"
  exit 0
fi
printf 'format: not in the house style (scripts/format.sh fixes it): %s\n' "${bad[@]}"
if [ "$major" != "$want_major" ]; then
  echo "format: clang-format $major, not $want_major: reported, not failed"
  exit 0
fi
exit 1
