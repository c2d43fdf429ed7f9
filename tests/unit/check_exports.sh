#!/usr/bin/env bash
# check_exports.sh LIB HEADER...: LIB's dynamic symbols are exactly the
# gdu_* functions the public HEADERs declare: nothing internal leaks out (a
# wildcard in the export map would), nothing public is missing.
set -euo pipefail
lib=$1
shift
# Names without their symbol version (name@@NODE); the version nodes
# themselves are absolute symbols (A), not calls.
exported=$(nm -D --defined-only "$lib" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort -u)
declared=$(grep -ohE '\bgdu_[a-z0-9_]+[[:space:]]*\(' "$@" | sed 's/[[:space:]]*($//' | sort -u)
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
[ -z "$extra" ] || echo "FAIL: $lib exports what no public header declares:" $extra
[ -z "$missing" ] || echo "FAIL: $lib lacks what its headers declare:" $missing
[ -z "$extra$missing" ] && echo "PASS: $lib exports the $(echo "$declared" | wc -l) functions of $*"
[ -z "$extra$missing" ]
