#!/usr/bin/env bash
# man.sh GDUNLOCK OUTDIR: writes gdunlock.1 and gdunlock-COMMAND.1 for every
# command into OUTDIR with help2man, from the program's own --help texts (the
# one source: a page cannot drift from what the command prints).
set -euo pipefail
gdunlock=$(realpath "$1")
out=$2
mkdir -p "$out"
version=$("$gdunlock" --version | awk '{print $2}')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# "  NAME   what it does" lines of gdunlock --help.
commands=$("$gdunlock" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print} on && /^$/ {exit}')
see_also=$(echo "$commands" | awk '{printf "%s\\fBgdunlock-%s\\fR(1)", (NR > 1 ? ", " : ""), $1}')
printf '[SEE ALSO]\n%s\n' "$see_also" >"$work/see-also"
# help2man runs the program through a shell command line unquoted: a build
# folder with a space in its path would split it, so it runs a wrapper here.
printf '#!/bin/sh\nexec "%s" "$@"\n' "$gdunlock" >"$work/gdunlock"
chmod +x "$work/gdunlock"
help2man --no-info --no-discard-stderr --version-string="$version" \
  --name="GPUDirect paths for NVIDIA GPUs, and what each delivers" \
  --include="$work/see-also" -o "$out/gdunlock.1" "$work/gdunlock"
join="awk '/^Usage:/ { u = \$0; next } u != \"\" && /^ +[[(]/ { sub(/^ +/, \" \"); u = u \$0; next } u != \"\" { print u; u = \"\" } { print } END { if (u != \"\") print u }'"
while read -r name what; do
  # help2man names a page after the program it runs: a gdunlock-NAME that
  # is `gdunlock NAME`.
  # The synopsis is one line for help2man (it takes the "Usage:" line alone
  # and would show a continuation as description); --help wraps it at 80
  # columns, so the continuation lines are joined here.
  printf '#!/bin/sh\n"%s" %s "$@" | %s\n' "$gdunlock" "$name" "$join" >"$work/gdunlock-$name"
  chmod +x "$work/gdunlock-$name"
  printf '[SEE ALSO]\n\\fBgdunlock\\fR(1)\n' >"$work/see-also-$name"
  help2man --no-info --no-discard-stderr --version-string="$version" --name="$what" \
    --include="$work/see-also-$name" -o "$out/gdunlock-$name.1" "$work/gdunlock-$name"
done <<<"$commands"
# Subcommands with options of their own get a page each: gdunlock-p2p-unlock(1).
for sub in "p2p unlock"; do
  page=gdunlock-${sub// /-}
  printf '#!/bin/sh\n"%s" %s "$@" | %s\n' "$gdunlock" "$sub" "$join" >"$work/$page"
  chmod +x "$work/$page"
  printf '[SEE ALSO]\n\\fBgdunlock\\fR(1), \\fBgdunlock-%s\\fR(1)\n' "${sub%% *}" >"$work/see-also-$page"
  help2man --no-info --no-discard-stderr --version-string="$version" \
    --name="what a GeForce machine needs for GPU P2P, and installing it" \
    --include="$work/see-also-$page" -o "$out/$page.1" "$work/$page"
done
