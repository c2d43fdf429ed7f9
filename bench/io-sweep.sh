#!/usr/bin/env bash
# Sweeps the I/O engine's workers x chunk size with gdunlock bench (engine
# path only) and prints a markdown table of GB/s; each run's numbers are
# appended as one JSON line to the output file. Used to choose the engine's
# defaults (include/gdunlock/io.h).
#
# usage: bench/io-sweep.sh -f FILE [-s SIZE] [--cold] [-o OUT.jsonl]
#                          [--workers "1 2 4 8 16"] [--chunks "1M 4M 16M"]
#                          [--gdunlock PATH] [--io SIZE] [--rounds N]
# Each cell is the median of N rounds (default 1: a sweep has many cells).
# FILE must be a bench file of at least SIZE bytes (gdunlock bench --create).
set -uo pipefail
file="" size=4G cold="" out=/dev/null io=16M rounds=1
workers="1 2 4 8 16" chunks="1M 4M 16M"
gdu=$(cd "$(dirname "$0")/.." && pwd)/build/bin/gdunlock
while [ $# -gt 0 ]; do
  case $1 in
    -f) file=$2; shift 2 ;;
    -s) size=$2; shift 2 ;;
    --cold) cold=--cold; shift ;;
    -o) out=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --chunks) chunks=$2; shift 2 ;;
    --gdunlock) gdu=$2; shift 2 ;;
    --io) io=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "io-sweep: unknown argument $1" >&2; exit 64 ;;
  esac
done
[ -n "$file" ] || { echo "io-sweep: -f FILE is required" >&2; exit 64; }
mode=${cold:+cold}; mode=${mode:-warm}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '| workers |'; for c in $chunks; do printf ' %s |' "$c"; done; printf '\n|---|'
for c in $chunks; do printf -- '---|'; done; printf '\n'
for w in $workers; do
  printf '| %s |' "$w"
  for c in $chunks; do
    if "$gdu" bench -f "$file" -s "$size" -i "$io" -w "$w" --chunk "$c" --paths engine --rounds "$rounds" --no-verify $cold --json \
         >"$tmp" 2>/dev/null; then
      python3 - "$tmp" "$mode" "$w" "$c" "$size" <<'PY' >>"$out"
import json, sys
d = json.load(open(sys.argv[1]))
e = next(x for x in d["paths"] if x["path"] == "engine")
print(json.dumps({"mode": sys.argv[2], "workers": int(sys.argv[3]), "chunk": sys.argv[4],
                  "size": sys.argv[5], "gbps": e.get("gbps", 0), "cpu_percent": e.get("cpu_percent", 0),
                  "p99_us": e.get("p99_us", 0), "gpu": d["machine"].get("gpu")}))
PY
      printf ' %.2f |' "$(python3 -c 'import json,sys; print(next(x for x in json.load(open(sys.argv[1]))["paths"] if x["path"]=="engine").get("gbps",0))' "$tmp")"
    else
      printf ' failed |'
    fi
  done
  printf '\n'
done
