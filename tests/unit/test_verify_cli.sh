#!/usr/bin/env bash
# gdunlock verify end to end on the CPU: the real binary against a fake
# libcuda (device memory = host memory) and a fake libcufile whose behaviour
# FAKE_CUFILE selects, with nvidia-fs stats fixtures standing in for /proc.
# Usage: test_verify_cli.sh GDUNLOCK FAKE_DIR FIXTURES SANITIZED(0|1)
set -u
bin=$1 fakes=$2 fx=$3/nvfs-stats sanitized=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/verify-cli-XXXXXX")
trap 'rm -rf "$work"' EXIT
# verify's own temporary files (shim report, cuFile log) go here, so the test can see leftovers.
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
export LD_LIBRARY_PATH=$fakes GDUNLOCK_LIBCUFILE=$fakes/libfakecufile.so
export GDUNLOCK_NVFS_STATS=$work/absent-stats GDUNLOCK_IO_WORKERS=2
unset GDUNLOCK_REPORT LD_PRELOAD
failures=0
bad() { echo "FAIL $*"; failures=$((failures + 1)); }

# run NAME EXPECTED_RC [ARGS...]: runs verify --json on a fresh file, output in $work/NAME.json
run() {
  local name=$1 want=$2
  shift 2
  "$bin" verify "$work/$name.bin" --size 1MiB --no-shim --json "$@" >"$work/$name.json" 2>"$work/$name.err"
  local rc=$?
  [ $rc -eq "$want" ] || bad "$name: exit $rc, expected $want: $(cat "$work/$name.json" "$work/$name.err")"
  [ -e "$work/$name.bin" ] && [ "${KEEP:-0}" = 0 ] && bad "$name: file left behind"
  return 0
}
has() { grep -q -- "$2" "$work/$1.json" || bad "$1: no '$2' in $(cat "$work/$1.json")"; }
lacks() { ! grep -q -- "$2" "$work/$1.json" || bad "$1: unexpected '$2'"; }
stats() { cp "$fx/$1-before.txt" "$work/stats"; export GDUNLOCK_NVFS_STATS=$work/stats FAKE_NVFS_STATS=$work/stats FAKE_NVFS_AFTER=$fx/$1-after.txt; }
no_stats() { export GDUNLOCK_NVFS_STATS=$work/absent-stats; unset FAKE_NVFS_STATS FAKE_NVFS_AFTER; }

# The H200 machine: no nvidia-fs, handle refused with 5027 -> COMPAT through the engine.
no_stats
FAKE_CUFILE=5027 run h200 2
has h200 '"verdict": "COMPAT"'
has h200 '"id": "cufile-handle-register"'
has h200 'CU_FILE_HANDLE_NOT_REGISTERED (5027); cuFile log: fake-cufile ERROR: udev property ID_FS_USAGE'
ls "${TMPDIR:-/tmp}"/gdunlock-cufile-* >/dev/null 2>&1 && bad "h200: temporary cuFile log left behind"
has h200 '"id": "engine-integrity-ok"'
has h200 '"id": "nvfs-not-loaded"'
has h200 '"id": "cufile-compat-mode"'
has h200 '"backend": "pipeline"'
has h200 '"gds_verdict": '
has h200 '"direct_path": '
FAKE_CUFILE=5027 "$bin" verify "$work/human.bin" --size 1MiB --no-shim >"$work/human.json" 2>&1
has human 'gdunlock verify: COMPAT'
has human 'why not DIRECT'
has human 'shim           not active: disabled with --no-shim'
GDUNLOCK=0 FAKE_CUFILE=5027 "$bin" verify "$work/off.bin" --size 1MiB --json >"$work/off.json" 2>&1
has off '"why_inactive": "disabled by GDUNLOCK=0"'
# Every boolean spelling kvikio takes turns it off, as in the shim.
GDUNLOCK=Off FAKE_CUFILE=5027 "$bin" verify "$work/off2.bin" --size 1MiB --json >"$work/off2.json" 2>&1
has off2 '"why_inactive": "disabled by GDUNLOCK=Off"'

# A cuFile log the user named: the run's lines are quoted, the file is kept.
echo "an old line" >"$work/user-cufile.log"
CUFILE_LOGFILE_PATH=$work/user-cufile.log FAKE_CUFILE=5027 run userlog 2
has userlog '"log": "fake-cufile ERROR'
lacks userlog 'an old line'
[ -s "$work/user-cufile.log" ] || bad "userlog: the user's cuFile log was removed"

# A FIFO as the stats file or as the user's cuFile log: neither is opened by
# verify, which would block. This shell holds the log's FIFO open both ways
# (as a pipe's reader would), so cuFile's writes go through and a reader
# opening it would wait for more forever.
mkfifo "$work/stats.fifo" "$work/log.fifo"
exec 3<>"$work/log.fifo"
GDUNLOCK_NVFS_STATS=$work/stats.fifo CUFILE_LOGFILE_PATH=$work/log.fifo FAKE_CUFILE=5027 \
  timeout 60 "$bin" verify "$work/fifo.bin" --size 1MiB --no-shim --json >"$work/fifo.json" 2>"$work/fifo.err"
rc=$?
log=""
while read -r -t 1 -u 3 line; do log+=$line; done
exec 3<&-
[ $rc -eq 2 ] || bad "fifo: exit $rc, expected 2: $(cat "$work/fifo.err")"
has fifo 'stats.fifo is not a regular file'
[[ "$log" == *"fake-cufile ERROR"* ]] || bad "fifo: cuFile's log did not reach the user's pipe ('$log')"
rm -f "$work/stats.fifo" "$work/log.fifo" "$work/fifo.bin"

# cuFile in compatibility mode moves the data itself.
FAKE_CUFILE=compat run compat 2
has compat '"id": "cufile-compat-mode"'
lacks compat 'engine-integrity-ok'
has compat '"integrity_ok": true'

# A direct run: Bar1-map ok grows, err does not.
stats direct
FAKE_CUFILE=direct run direct 0
has direct '"verdict": "DIRECT"'
has direct '"bar1_map.ok": 2'
has direct '"registered_mib_delta": 32'
has direct '"nvfs_version": "2.28"'
has direct '"reasons": \[\]'
lacks direct '"doctor"'
stats direct
FAKE_CUDA_NO_VMM=1 FAKE_CUFILE=direct run novmm 0
has novmm '"skipped": "the device does not support virtual memory management'

# Bar1-map err grew: COMPAT with that cause.
stats bar1-err
FAKE_CUFILE=direct run bar1err 2
has bar1err '"id": "bar1-map-err"'
has bar1err 'grew by 2'

# Wrong bytes, failed reads: FAILED with what failed.
stats direct
FAKE_CUFILE=corrupt run corrupt 1
has corrupt '"id": "integrity-mismatch"'
has corrupt 'first at byte 4097'
stats direct
FAKE_CUFILE=readfail run readfail 1
has readfail 'CU_FILE_NVFS_DRIVER_ERROR (5010)'

# No libcufile at all: the engine decides.
no_stats
GDUNLOCK_LIBCUFILE=$work/none.so LD_LIBRARY_PATH=$fakes run nocufile 2
has nocufile '"id": "engine-integrity-ok"'

# Setup errors: no GPU, no such GPU, an existing file.
LD_LIBRARY_PATH=$work run nocuda 69
has nocuda 'libcuda'
"$bin" verify "$work/no/such/dir/x.bin" --no-shim >"$work/nodir.json" 2>&1
rc=$?
[ $rc -eq 66 ] || bad "nodir: exit $rc, expected 66"
has nodir 'No such file or directory'
FAKE_CUFILE=5027 run progress 2 --progress
grep -q '^verify: checking integrity\|^verify: cuFile unusable' "$work/progress.err" || bad "progress: no stages on stderr: $(cat "$work/progress.err")"
run gpu3 69 --gpu 3
has gpu3 'GPU 3 does not exist'
echo "keep me" >"$work/precious.bin"
"$bin" verify "$work/precious.bin" --no-shim >"$work/precious.json" 2>&1
rc=$?
[ $rc -eq 64 ] && [ "$(cat "$work/precious.bin")" = "keep me" ] || bad "precious: exit $rc, file $(cat "$work/precious.bin")"
has precious '--force'
KEEP=1 FAKE_CUFILE=compat run kept 2 --keep
[ "$(stat -c %s "$work/kept.bin" 2>/dev/null)" = 1048576 ] || bad "kept: --keep did not leave the 1 MiB file"

# Through the shim re-exec (not under ASan: the shim cannot be preloaded ahead of it).
shim=$(dirname "$bin")/../lib/libgdunlock.so
if [ "$sanitized" = 0 ] && [ -e "$shim" ]; then
  FAKE_CUFILE=5027 "$bin" verify "$work/shim.bin" --size 1MiB --json >"$work/shim.json" 2>"$work/shim.err"
  rc=$?
  [ $rc -eq 2 ] || bad "shim: exit $rc: $(cat "$work/shim.json" "$work/shim.err")"
  has shim '"active": true'
  has shim 'the shim wrote no report' # the fake GPU is not an NVIDIA device to the shim
  # Killed in the middle (SIGTERM: a background job ignores SIGINT): the child
  # dies, the parent reports it and removes the scratch file and its temporary directory.
  FAKE_CUFILE=compat FAKE_CUFILE_HANG=1 "$bin" verify "$work/intr.bin" --size 1MiB --json >"$work/intr.json" 2>"$work/intr.err" &
  parent=$!
  for _ in $(seq 100); do [ -e "$work/intr.bin" ] && break; sleep 0.1; done
  sleep 0.3
  child=$(pgrep -P $parent | head -1)
  [ -n "$child" ] && kill -TERM "$child"
  wait $parent
  rc=$?
  [ $rc -eq 1 ] || bad "intr: exit $rc, expected 1"
  has intr 'killed by signal 15'
  [ -e "$work/intr.bin" ] && bad "intr: scratch file left behind"
  # a file verify may not overwrite survives the same
  echo "keep me" >"$work/intr2.bin"
  FAKE_CUFILE=compat FAKE_CUFILE_HANG=1 "$bin" verify "$work/intr2.bin" --size 1MiB >/dev/null 2>&1 &
  parent=$!
  sleep 0.3
  child=$(pgrep -P $parent | head -1)
  [ -n "$child" ] && kill -TERM "$child"
  wait $parent
  [ "$(cat "$work/intr2.bin")" = "keep me" ] || bad "intr2: a file verify refused to overwrite was touched"
fi

leftover=$(ls -A "$TMPDIR")
[ -z "$leftover" ] || bad "temporary files left behind: $leftover"

[ $failures -eq 0 ] && echo "verify CLI: all cases passed"
exit $((failures > 0))
