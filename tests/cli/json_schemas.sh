#!/usr/bin/env bash
# Every command's --json report, and the error document, against the schemas
# docs/cli-json.md and docs/doctor-json.md document (tests/cli/json_check.py):
# the envelope, every member documented, text that is not UTF-8 kept exact in
# its _escaped twin. The GPU commands run on the fake libcuda/libcufile the
# unit tests build. Usage:
#   json_schemas.sh GDUNLOCK P2P_FAKE_CUDA_DIR VERIFY_FAKES_DIR
set -uo pipefail
bin=$1 p2p_fake=$2 verify_fakes=$3
here=$(cd "$(dirname "$0")" && pwd)
docs=$here/../../docs
fixtures=$here/../fixtures/doctor
work=$(mktemp -d "${TMPDIR:-/tmp}/json-schemas-XXXXXX")
trap 'rm -rf "$work"' EXIT
unset LD_PRELOAD GDUNLOCK_REPORT
fail=0
n=0
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
# The documents and the checks on them, all read by one python3 at the end
# (one interpreter, not one per check).
manifest=$work/manifest

# doc COMMAND WANT_RC [ENV=VALUE...] -- ARGS...: gdunlock ARGS (ENV set) must
# exit WANT_RC with one documented document for COMMAND on stdout.
doc() {
  local command=$1 want=$2 env=()
  shift 2
  while [ "$1" != "--" ]; do env+=("$1"); shift; done
  shift
  n=$((n + 1))
  env "${env[@]}" timeout 60 "$bin" "$@" >"$work/out-$n" 2>"$work/err-$n" </dev/null
  local rc=$?
  [ $rc -eq "$want" ] || bad "gdunlock $*: exit $rc, expected $want: $(head -c 200 "$work/err-$n")"
  printf '%s\t%s\t%s\t%s\n' "$work/out-$n" $rc "$command" "gdunlock $* -> $rc" >>"$manifest"
}
# has PYTHON-EXPRESSION: true of the last document (d).
has() { printf 'has\t%s\n' "$1" >>"$manifest"; }

printf '\x37\x00\x00\x00\x00\x00\x00\x00{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}  ab' >"$work/tiny.safetensors"
latin1=$'caf\xe9'   # a name in Latin-1: not UTF-8
cp "$work/tiny.safetensors" "$work/$latin1.safetensors"
head -c 65536 /dev/zero >"$work/bench"
cp "$work/bench" "$work/$latin1"

# Reports, one per command.
doc doctor 0 -- doctor --json --sysroot "$fixtures/l40s-nvfs" /data/model.safetensors
doc doctor 13 -- doctor --json --sysroot "$fixtures/l40s-nvfs-missing-block" /data/model.safetensors
doc topo 0 -- topo --json --sysroot "$fixtures/l40s-nvfs"
doc load 0 -- load "$work/tiny.safetensors" --to host --verify --list --json
doc bench 0 -- bench -f "$work/bench" --create --force -s 64K -i 4K --paths host --rounds 1 --json
has 'd["command"] == "bench" and d["command_line"].startswith("gdunlock bench -f ")'
doc p2p 0 LD_LIBRARY_PATH="$p2p_fake" -- p2p --size 1M --iters 2 --json
has 'd["measured"]["verification"]["ok"] and len(d["pairs"]) == 2'
doc p2p 0 LD_LIBRARY_PATH="$p2p_fake" -- p2p --no-bench --json
has 'd["measured"] is None'
verify_env=(LD_LIBRARY_PATH="$verify_fakes" GDUNLOCK_LIBCUFILE="$verify_fakes/libfakecufile.so"
  GDUNLOCK_NVFS_STATS="$work/absent" FAKE_CUFILE=5027 GDUNLOCK_IO_WORKERS=2 TMPDIR="$work")
doc verify 2 "${verify_env[@]}" -- verify "$work/v.bin" --size 1MiB --no-shim --json
has 'd["verdict"] == "COMPAT"'
# run: stdout holds the report alone; CMD's own output goes to stderr.
doc run 3 -- run --json -- sh -c 'echo CMD-output; exit 3'
has 'd["exit_status"] == 3'
grep -q CMD-output "$work/err-$n" || bad "CMD's output lost: $(cat "$work/err-$n")"
doc run 0 -- run --json --report "$work/report.json" -- true
has "d == json.load(open('$work/report.json'))"

# Failures: the error document, topo's "no GPU" included.
doc topo 69 -- topo --json --sysroot "$work"
doc load 66 -- load /no/such.safetensors --json
doc bench 64 -- bench --json -s banana -f x
doc run 66 -- run --json -- /no/such/program

# Text that is not UTF-8 (a Latin-1 path, a command line): valid JSON, the
# bytes kept exact in the _escaped twin (json_check.py undoes it).
doc load 0 -- load "$work/$latin1.safetensors" --to host --json
has '"\ufffd" in d["path"] and d["path_escaped"].endswith("caf\\xe9.safetensors") and "command_line_escaped" in d and "path_escaped" in d["files"][0]'
doc load 66 -- load "$work/$latin1.missing" --json
has '"caf\\xe9.missing" in d["error"]["message_escaped"]'
doc doctor 0 -- doctor --json --sysroot "$fixtures/l40s-nvfs" "/data/$latin1"
has 'd["gds"]["target_escaped"] == "/data/caf\\xe9"'
cp -a "$fixtures/l40s-nvfs" "$work/$latin1-sysroot"
doc doctor 0 -- doctor --json --sysroot "$work/$latin1-sysroot" /data/model.safetensors
has 'd["source_escaped"].endswith("caf\\xe9-sysroot")'
doc bench 0 -- bench -f "$work/$latin1" --create --force -s 64K -i 4K --paths host --rounds 1 --json
has 'd["params"]["file_escaped"].endswith("caf\\xe9")'
doc verify 2 "${verify_env[@]}" -- verify "$work/$latin1.bin" --size 1MiB --no-shim --json
has 'd["file"]["path_escaped"].endswith("caf\\xe9.bin")'
doc run 0 -- run --json -- echo "$latin1"
has 'd["command_line_escaped"].endswith("echo '"'caf\\\\xe9'"'")'
doc run 0 -- run --json --report "$work/$latin1.json" -- true
has "d == json.load(open(b'$work/caf\\xe9.json'))"
doc "" 64 -- "$latin1" --json
has 'd["command"] == "caf\ufffd"'

python3 "$here/json_check.py" --batch "$docs" "$manifest" || fail=$((fail + 1))
echo "$n documents; $fail failed"
[ $fail -eq 0 ]
