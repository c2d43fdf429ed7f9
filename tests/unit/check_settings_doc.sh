#!/usr/bin/env bash
# check_settings_doc.sh ROOT: every environment variable of gdunlock's own
# (a "GDUNLOCK..." string in src/ or python/gdunlock/) is listed, with its
# default and effect, in docs/settings.md, their one home. Exit 0 pass, 1 fail.
set -euo pipefail
root=$1
doc=$root/docs/settings.md
status=0
while read -r name; do
  grep -qF "| \`$name\` |" "$doc" || { echo "FAIL: $name is read but not in docs/settings.md's tables"; status=1; }
done < <(grep -rhoE '"GDUNLOCK(_[A-Z0-9_]+)?"' "$root/src" "$root/python/gdunlock" | tr -d '"' | sort -u)
[ $status -eq 0 ] && echo "PASS: every GDUNLOCK* variable read is in docs/settings.md"
exit $status
