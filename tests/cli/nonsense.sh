#!/usr/bin/env bash
# Feeds every gdunlock command nonsense (missing files, directories,
# /dev/zero, an empty file, huge and negative numbers, a GPU that does not
# exist, unknown flags) and checks each answer: a documented exit code, a
# message naming the problem when it fails, no crash (signal) and no
# hang (timeout). Doctor reports its verdict on stdout, so a message on either
# stream counts. Usage: nonsense.sh path/to/gdunlock
set -uo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$(cd "$(dirname "$0")/../fixtures/doctor" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/empty"
printf 'not a safetensors file' >"$work/junk"
mkfifo "$work/fifo"
touch "$work/not-empty-dir-file"
documented=" 0 1 2 10 11 12 13 64 66 69 70 74 "
pass=0
fail=0

# check [-m TEXT] [-full|-json] [-esc] expected-codes... -- args...: -m: the
# messages (stderr and stdout) must contain TEXT; -full: stdout is /dev/full;
# -json: stdout must be one JSON document in the envelope, every member
# documented, and a failure's the error document (tests/cli/json_check.py);
# -esc: the arguments or files hold terminal escapes (ESC), which must reach
# neither stream raw, but escaped (\x1b).
check() {
  local want=() args=() says="" out="$work/out" json=0 esc=0
  if [ "$1" = "-m" ]; then says=$2; shift 2; fi
  if [ "$1" = "-full" ]; then out=/dev/full; : >"$work/out"; shift; fi
  if [ "$1" = "-json" ]; then json=1; shift; fi
  if [ "$1" = "-esc" ]; then esc=1; shift; fi
  while [ "$1" != "--" ]; do want+=("$1"); shift; done
  shift
  args=("$@")
  timeout 60 "$bin" "${args[@]}" >"$out" 2>"$work/err" </dev/null
  local rc=$?
  local why=""
  if [ $rc -eq 124 ]; then
    why="hung (timeout)"
  elif [ $rc -ge 128 ]; then
    why="killed by signal $((rc - 128))"
  elif [[ "$documented" != *" $rc "* ]]; then
    why="undocumented exit code $rc"
  elif [ ${#want[@]} -gt 0 ] && [[ " ${want[*]} " != *" $rc "* ]]; then
    why="exit $rc, expected one of: ${want[*]}"
  elif [ $rc -ne 0 ] && [ ! -s "$work/err" ] && [ ! -s "$work/out" ]; then
    why="exit $rc with no message"
  elif grep -qiE 'AddressSanitizer|runtime error:|LeakSanitizer' "$work/err"; then
    why="sanitizer report"
  elif [ -n "$says" ] && ! grep -qF -- "$says" "$work/err" "$work/out"; then
    why="the message does not say '$says'"
  elif [ $esc = 1 ] && grep -q $'\x1b' "$work/out" "$work/err"; then
    why="a raw ESC reached the terminal: $(grep -ah $'\x1b' "$work/out" "$work/err" | head -1 | od -c | head -2 | tr -s ' ')"
  elif [ $esc = 1 ] && ! grep -qF '\x1b' "$work/out" "$work/err"; then
    why="no escaped ESC (\\x1b) in the output"
  elif [ $json = 1 ] && ! json_why=$(python3 "$here/json_check.py" "$here/../../docs" "$work/out" $rc 2>&1); then
    why=$json_why
  fi
  if [ -n "$why" ]; then
    fail=$((fail + 1))
    echo "FAIL gdunlock ${args[*]}: $why"
    sed 's/^/    /' "$work/err" | head -5
  else
    pass=$((pass + 1))
    echo "ok   gdunlock ${args[*]} -> $rc: $(head -c 120 "$work/err" | tr '\n' ' ')"
  fi
}

check 64 --
check -m "unknown command 'no-such-command'" 64 -- no-such-command
check 0 -- --help
check -m "gdunlock 0" 0 -- -V
# ok_if CONDITION DESCRIPTION: one pass or fail of its own.
ok_if() {
  if eval "$1"; then pass=$((pass + 1)); echo "ok   $2"; else fail=$((fail + 1)); echo "FAIL $2"; fi
}
for cmd in doctor topo verify bench p2p load run; do
  check 0 -- "$cmd" --help
  cp "$work/out" "$work/help-$cmd"
  # The same text however help is asked for, and --help wins over a bad option.
  for asked in "help $cmd" "--help $cmd" "$cmd --no-such-flag --help"; do
    "$bin" $asked >"$work/out" 2>/dev/null
    ok_if 'cmp -s "$work/out" "$work/help-$cmd"' "gdunlock $asked prints '$cmd --help'"
  done
  # A bad option: one line saying which, and where the usage is; not the usage itself.
  check -m "unknown option '--no-such-flag'" 64 -- "$cmd" --no-such-flag
  ok_if '[ "$(wc -l <"$work/err")" -eq 2 ] && grep -qx "see '"'"'gdunlock $cmd --help'"'"'" "$work/err"' \
    "gdunlock $cmd --no-such-flag: two lines, the second where to look"
done
check -m "option '--sysroot' needs a value" 64 -- topo --sysroot
check -m "option '-s' needs a value" 64 -- bench -s
check -m "no command given" -json 64 -- --json
check 64 -- run
check 66 -- run -- /no/such/program
# CMD leaves a FIFO where the shim's reports go: not read, removed with the folder.
check 0 -- run -- sh -c 'mkfifo "${GDUNLOCK_REPORT%/*}/report-1.json"'
check 0 10 11 12 69 -- doctor
check 0 10 11 12 66 69 -- doctor /no/such/path
check 0 10 11 12 13 69 -- doctor /dev/zero
check 0 10 11 12 13 69 -- doctor "$work/fifo"
check 64 -- doctor --sysroot
check 66 -- doctor --sysroot /no/such/dir
check -m "is not a directory" 66 -- doctor --sysroot "$work/empty"
check 0 10 11 12 13 69 -- doctor --sysroot "$work"
check -m "cannot create /proc/gdu-x" 66 -- doctor --capture /proc/gdu-x
check -m "is not empty" 64 -- doctor --capture "$work"
check 0 69 -- topo
check 66 -- topo --sysroot /no/such/dir
check -m "is not a directory" 66 -- topo --sysroot "$work/empty"
# A capture with a FIFO where doctor reads a file, and a link to this
# machine's own files: doctor neither blocks nor leaves the capture.
cp -a "$fixtures/l40s-nvfs" "$work/sysroot"
rm "$work/sysroot/proc/driver/nvidia/version" "$work/sysroot/etc/cufile.json"
mkfifo "$work/sysroot/proc/driver/nvidia/version"
ln -s /etc/passwd "$work/sysroot/etc/cufile.json"
check -m "no cufile.json at /etc/cufile.json" 0 -- doctor --sysroot "$work/sysroot" /data/model.safetensors
mkfifo "$work/sysroot/sys/bus/pci/devices/0000:00:01.0/label"
check -m "0000:00:01.0/label is not a plain file" 13 -- doctor --sysroot "$work/sysroot" /data/model.safetensors
check 0 -- topo --sysroot "$work/sysroot"
rm "$work/sysroot/gdunlock-live.json"
mkfifo "$work/sysroot/gdunlock-live.json"
check -m "gdunlock-live.json: not a regular file" 13 -- doctor --sysroot "$work/sysroot" /data/model.safetensors
check 64 -- verify
check 66 69 -- verify /no/such/dir/file
check 64 66 69 -- verify "$work"
check 64 66 69 -- verify /dev/zero
check 64 -- verify "$work/new" --size -1
check 64 -- verify "$work/new" --size 99999999999999999999
check 64 -- verify "$work/new" --size banana
check 64 69 -- verify "$work/new" --gpu 99
check 64 -- verify "$work/new" --gpu -3
check 64 66 -- bench
check 66 69 -- bench -f /no/such/file
check 64 66 69 -- bench -f /dev/zero -s 1M
check 64 66 69 -- bench -f "$work/empty"
check 64 66 69 -- bench -D "$work/empty"
# A file that is not a bench file is someone's data: never overwritten without --force.
printf 'precious data\n' >"$work/precious"
check -m "pass --force" 64 -- bench -f "$work/precious" --create -s 4K -i 4K --paths host --rounds 1
check -m "pass --force" 64 -- bench -f "$work/precious" --rw write -s 4K -i 4K --paths host --rounds 1
check -m "pass --force" 64 -- bench -f "$work/precious" -I 1 -s 4K -i 4K --paths host --rounds 1
if [ "$(cat "$work/precious")" = "precious data" ]; then
  pass=$((pass + 1)); echo "ok   bench left the file it refused as it was"
else
  fail=$((fail + 1)); echo "FAIL bench overwrote $work/precious: $(head -c 40 "$work/precious" | od -c | head -1)"
fi
check 0 -- bench -f "$work/precious" --create --force -s 4K -i 4K --paths host --rounds 1
check 0 -- bench -f "$work/precious" --create --seed 9 -s 8K -i 4K --paths host --rounds 1
# Any file is read as it is (a checkpoint's host ceiling, as gdsio reads it): a
# foreign one with a note that its data is not checked; --no-verify says nothing.
head -c 65536 /dev/urandom >"$work/foreign"
check -m "not a bench file of seed 1, read as it is" 0 -- bench -f "$work/foreign" -s 64K -i 4K --paths host --rounds 1
check 0 -- bench -f "$work/foreign" -s 64K -i 4K --paths host --rounds 1 --no-verify
check -m "is a directory" 66 -- bench -f "$work" -s 4K
check -m "not a regular file" 66 -- bench -f "$work/fifo" --create -s 4K
check 64 -- bench -f "$work/x" -s -5
check 64 -- bench -f "$work/x" -s 99999999999999999999
check 64 -- bench -f "$work/x" -w 0
check 64 -- bench -f "$work/x" -w 100000000
# gdsio's -x (transfer type) and -I (I/O type); -x is no longer the direction.
check -m "no longer the direction: give -I 1 or --rw write" 64 -- bench -f "$work/x" -x write
check -m "invalid -x transfer type" 64 -- bench -f "$work/x" -x 3
check -m "invalid -I/--rw" 64 -- bench -f "$work/x" -I 4
check -m "invalid -I/--rw" 64 -- bench -f "$work/x" --rw sideways
check 0 -- bench -f "$work/precious" --seed 9 -s 8K -i 4K -x 1 -I 2 --rounds 1 --json
ok_if 'python3 -c "import json,sys; d = json.load(open(sys.argv[1])); p = d[\"params\"]; sys.exit([x[\"path\"] for x in d[\"paths\"]] != [\"host\", \"host-uring\"] or p[\"op\"] != \"read\" or p[\"order\"] != \"rand\")" "$work/out"' \
  "bench -x 1 -I 2: the CPU-only paths, random reads"
check 64 66 69 -- bench -f "$work/x" -d 99
check 0 1 69 -- p2p
check 64 -- p2p --gpus banana
check 64 69 -- p2p --gpus 0,99
check 64 -- p2p --size -1
check 64 -- p2p --iters 0
# Output that cannot be written (stdout on /dev/full) is an I/O error, 74,
# for every command, whatever it found.
printf '\x37\x00\x00\x00\x00\x00\x00\x00{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}  ab' >"$work/tiny.safetensors"
check 0 -- load "$work/tiny.safetensors" --to host
# Staging memory that cannot be had is named as memory, with the settings
# that lower it, not as a storage error (an address-space limit below one
# slot of 1 GiB; not under a sanitizer, whose shadow memory needs more).
if ! ldd "$bin" 2>/dev/null | grep -q 'lib[at]san'; then
  (ulimit -v 1000000 && GDUNLOCK_IO_CHUNK=1G timeout 60 "$bin" load "$work/tiny.safetensors" \
    --to host) >"$work/out" 2>&1
  rc=$?
  ok_if '[ "$rc" -eq 70 ] && grep -q "GDU_ST_ERR_NOMEM: .*staging memory" "$work/out" &&
    grep -q "lower GDUNLOCK_IO_CHUNK" "$work/out"' "load with staging memory short names it"
fi
full="writing the output failed"
check -m "$full" -full 74 -- --help
check -m "$full" -full 74 -- doctor --sysroot "$fixtures/l40s-nvfs"
check -m "$full" -full 74 -- doctor --json --sysroot "$fixtures/l40s-nvfs"
check -m "$full" -full 74 -- topo --sysroot "$fixtures/l40s-nvfs"
check -m "$full" -full 74 -- topo --json --sysroot "$fixtures/l40s-nvfs"
check -m "$full" -full 74 -- load "$work/tiny.safetensors" --to host
check -m "$full" -full 74 -- load "$work/tiny.safetensors" --to host --json
check -m "$full" -full 74 -- run --json -- true
check -m "$full" -full 74 -- bench -f "$work/precious" --seed 9 -s 8K -i 4K --paths host --rounds 1
check -m "$full" -full 74 -- bench -f "$work/precious" --seed 9 -s 8K -i 4K --paths host --rounds 1 --json
check -m "$full" -full 74 -- verify "$work/new" --no-shim --json
# With --json, one JSON document on stdout, errors included.
check -json 69 -- p2p --json
check -json 64 -- p2p --json --gpus banana
check -json 64 -- p2p --json --iters 0
check -json 64 -- p2p --no-such-flag --json
check -json 64 -- no-such-command --json
check -json 66 -- doctor --json --sysroot /no/such/dir
check -json 64 -- doctor --json --no-such-flag
check -json 64 -- doctor --json /a /b
check -json 66 -- doctor --json --capture /proc/gdu-x
check -json 0 -- doctor --json --sysroot "$fixtures/l40s-nvfs" /data/model.safetensors
check -json 13 -- doctor --json --sysroot "$fixtures/l40s-nvfs-missing-block" /data/model.safetensors
check -json 66 -- topo --json --sysroot /no/such/dir
check -json 64 -- topo --json extra
check -json 0 -- topo --json --sysroot "$fixtures/l40s-nvfs"
check -json 66 -- bench --json -f /no/such/file
check -json 64 -- bench --json -f "$work/x" -s banana
check -json 64 -- bench --json
check -json 64 -- bench --json -f "$work/junk" --create -s 4K
check -json 66 -- verify --json /no/such/dir/file
check -json 64 -- verify --json "$work/new" --size banana
check -json 64 -- verify --json
check -json 69 -- verify --json --no-shim "$work/new"
check -json 64 -- load --json
check -json 64 -- load --json --no-such-flag "$work/junk"
check -json 64 -- load --json "$work/junk" --gpu banana
check -json 64 -- load --json "$work/junk" --to disk
check -json 66 -- load --json /no/such/model.safetensors
check -json 64 66 -- load --json "$work/junk" --to host
check -json 64 -- run --json
check -json 64 -- run --json --log loud -- true
check -json 66 -- run --json -- /no/such/program
check 64 -- load
check 66 -- load /no/such/model.safetensors
mkdir "$work/no-model" # a folder stands for the checkpoint it holds; this one holds none
check -m "no .safetensors file or index in it" 66 -- load "$work/no-model"
check 64 66 -- load /dev/zero --to host
check 64 66 -- load "$work/empty" --to host
check 64 66 -- load "$work/junk" --to host
check 64 66 69 -- load "$work/junk" --gpu 99
check 64 -- load "$work/junk" --gpu -1
check 64 -- load "$work/junk" --gpu 0,0,banana
# Special files as the file to load or bench, each named for what it is: a
# socket's open fails with ENXIO, a /proc file is regular with a size of 0.
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$work/sock"
check -m "sock is a socket, not a regular file" 66 -- load "$work/sock" --to host
check -m "fifo is a FIFO, not a regular file" 66 -- load "$work/fifo" --to host
check -m "/dev/zero is a character device, not a regular file" 66 -- load /dev/zero --to host
check -m "/proc/self/status is a file of /proc (procfs)" 66 -- load /proc/self/status --to host
check -m "/proc/self/status is a file of /proc (procfs)" 66 -- bench -f /proc/self/status -s 4K
check -m "sock is a socket, not a regular file" 66 -- bench -f "$work/sock" -s 4K
if [ -f /sys/kernel/mm/transparent_hugepage/enabled ]; then
  check -m "is a file of /sys (sysfs)" 66 -- load /sys/kernel/mm/transparent_hugepage/enabled --to host
fi
check -m "with --to host there are none" 64 -- load "$work/tiny.safetensors" --to host --gpu 0
check -m "with --to host there are none" 64 -- load "$work/tiny.safetensors" --gpu 1 --to host
# --list: a multi-byte name takes the columns of its characters, not of its bytes.
printf '\x6f\x00\x00\x00\x00\x00\x00\x00{"\xc3\xa9t\xc3\xa9":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"ete":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}ab' >"$work/names.safetensors"
check 0 -- load "$work/names.safetensors" --to host --list
ok_if 'python3 -c "import sys; r = [l.index(\" U8 \") for l in open(sys.argv[1], encoding=\"utf-8\") if \" U8 \" in l]; sys.exit(len(r) != 2 or r[0] != r[1])" "$work/out"' \
  "load --list: the dtype column lines up after a multi-byte name"

# Terminal escapes (a colour change, an OSC title) in strings from outside:
# arguments, file names, a captured machine's files, the shim's reports.
esc=$'\e]0;pwned\a\e[31m'
check -esc 64 -- "x${esc}"
check -esc 64 -- help "x${esc}"
mkdir -p "$work/dir${esc}"
check -esc 0 -- bench -f "$work/dir${esc}/bench" --create -s 4K -i 4K --paths host --rounds 1
check -esc 66 -- bench -f "$work/no${esc}/bench" -s 4K -i 4K --paths host --rounds 1
printf 'x' >"$work/dir${esc}/taken"
check -esc 64 69 -- verify "$work/dir${esc}/taken" --no-shim
check -esc 66 -- run -- "/no/such/${esc}"
check -esc 0 -- run -- sh -c 'printf "%s" "{\"pid\": 1, \"driver\": \"\\u001b]0;pwned\\u0007\", \"gpus\": [{\"mode\": \"unlocked\", \"reason\": \"\\u001b[2J\"}]}" >"${GDUNLOCK_REPORT%/*}/report-1.json"'
check -esc 66 -- doctor --sysroot "$work/no${esc}"
cp -a "$fixtures/l40s-nvfs" "$work/esc-sysroot"
sed -i "s/^Model:.*/Model: \t\t NVIDIA L40S${esc}/" "$work"/esc-sysroot/proc/driver/nvidia/gpus/*/information
sed -i 's/"NVIDIA L40S"/"NVIDIA L40S\\u001b]0;pwned\\u0007"/' "$work/esc-sysroot/gdunlock-live.json"
check -esc 0 10 11 12 13 -- doctor --sysroot "$work/esc-sysroot" /data/model.safetensors
check -esc 0 -- topo --sysroot "$work/esc-sysroot"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
