#!/usr/bin/env bash
# The man pages help2man made from each command's --help (scripts/man.sh):
# every page's SYNOPSIS is the command's whole usage, wrapped lines and all,
# and nothing of it spills into DESCRIPTION; bench's -w default is the CPUs,
# not the build machine's count. Reads the pages' roff source (no groff).
# Usage: man_pages.sh GDUNLOCK MAN1_DIR
set -uo pipefail
bin=$1 dir=$2
fail=0
continued='^ *[[(]'
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
squeeze() { tr -s ' \n' '  ' | sed 's/^ //; s/ $//'; }
# A section's text: roff requests dropped, font escapes and \- undone.
section() {
  awk -v want="$1" '/^\.SH / { on = ($2 == want); next } on' "$2" |
    sed -E 's/^\.(B|I|BR|IR) //; /^\.[A-Za-z]+/d; s/\\f[BIRP]//g; s/\\[,\/&]//g; s/\\-/-/g'
}
for cmd in "" doctor topo verify bench p2p load run "p2p unlock"; do
  name=gdunlock${cmd:+-${cmd// /-}}
  page=$dir/$name.1
  [ -s "$page" ] || { bad "$page missing"; continue; }
  # The usage as --help prints it: "Usage:" and its indented continuation
  # lines ("or:" lines are other synopses, as help2man reads them).
  want=$("$bin" $cmd --help | awk '/^Usage:/ { on = 1; sub(/^Usage: /, ""); print; next }
    on && /^ +[[(]/ { print; next } on && /^ +or: / { sub(/^ +or: +/, ""); print; next } { exit }' | squeeze)
  got=$(section SYNOPSIS "$page" | squeeze)
  [ "$got" = "$want" ] || bad "$name(1) SYNOPSIS is '$got', the usage '$want'"
  first=$(section DESCRIPTION "$page" | awk 'NF { print; exit }')
  [[ "$first" =~ $continued ]] && bad "$name(1) DESCRIPTION begins with the usage's rest: $first"
done
"$bin" bench --help | grep -q -- "-w N .*(default: 3/4 of the CPUs, 2 to 16)" ||
  bad "bench --help does not give -w's default as 3/4 of the CPUs, 2 to 16"
section OPTIONS "$dir/gdunlock-bench.1" | grep -q "3/4 of the CPUs, 2 to 16" ||
  section DESCRIPTION "$dir/gdunlock-bench.1" | grep -q "3/4 of the CPUs, 2 to 16" ||
  bad "gdunlock-bench(1) does not give -w's default as 3/4 of the CPUs, 2 to 16"
[ $fail -eq 0 ] && echo "PASS: every page's synopsis is its command's whole usage"
[ $fail -eq 0 ]
