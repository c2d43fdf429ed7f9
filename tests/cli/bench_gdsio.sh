#!/usr/bin/env bash
# bench_gdsio.sh GDUNLOCK FAKE_CUDA_DIR: gdunlock bench as gdsio users type
# it. A file that is not a bench file is read as it is, unchecked, with a
# note (it was refused with exit 66, naming only --create, which would
# rewrite it); -T SECONDS runs each path that long; without a GPU, libcuda's
# message is printed once, not on every GPU row. Exit 0 pass, 1 fail.
set -uo pipefail
gdu=$1
fake_cuda=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/gdunlock bench gdsio XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
bad() { echo "FAIL: $*"; status=1; }
json() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }

# Someone's data, 4 MiB: read by the engine (fake GPU) and host, unchecked.
head -c 4194304 /dev/urandom >"$work/data.bin"
cp "$work/data.bin" "$work/before.bin"
LD_LIBRARY_PATH=$fake_cuda "$gdu" bench -f "$work/data.bin" -s 4M -i 1M -d 0 -x 2 --paths engine,host \
  --rounds 1 --json >"$work/foreign.json" 2>"$work/foreign.err"
rc=$?
[ $rc -eq 0 ] || bad "a file that is not a bench file: exit $rc: $(cat "$work/foreign.err")"
grep -q "note: .*not a bench file of seed 1, read as it is" "$work/foreign.err" ||
  bad "no note on stderr: $(cat "$work/foreign.err")"
json "$work/foreign.json" 'd["params"]["verify"] is False and "not a bench file" in d["params"]["file_note"] and all(p["ran"] and p["verified"] is None for p in d["paths"])' ||
  bad "the JSON does not say the data was read unchecked: $(cat "$work/foreign.json")"
cmp -s "$work/data.bin" "$work/before.bin" || bad "the file was changed"
# gdsio's own form, -x 0 (cuFile): rows that say why, no refusal of the file.
LD_LIBRARY_PATH=$fake_cuda GDUNLOCK_LIBCUFILE=/nonexistent/libcufile.so.0 \
  "$gdu" bench -f "$work/data.bin" -s 4M -d 0 -x 0 --rounds 1 >"$work/x0.out" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "-d 0 -x 0 on a file that is not a bench file: exit $rc: $(cat "$work/x0.out")"
# Writes still refuse to overwrite it.
"$gdu" bench -f "$work/data.bin" -s 4M --rw write --paths host >/dev/null 2>&1
[ $? -eq 64 ] || bad "a write over a file that is not a bench file was not refused with 64"

# -T: passes over the file until the time has passed; one round.
"$gdu" bench -f "$work/t.dat" --create -s 1M -i 256K -T 1 --paths host --json >"$work/t.json" 2>&1 ||
  bad "-T 1: exit $?: $(cat "$work/t.json")"
json "$work/t.json" 'd["params"]["seconds"] == 1 and d["params"]["rounds"] == 1 and d["paths"][0]["passes"] >= 2' ||
  bad "-T 1 did not pass over the file again: $(cat "$work/t.json")"
"$gdu" bench -f "$work/t.dat" -s 1M -T 0 >/dev/null 2>&1
[ $? -eq 64 ] || bad "-T 0 was not refused with 64"

# No GPU: libcuda's message once, each GPU row pointing to it.
LD_LIBRARY_PATH=/nonexistent "$gdu" bench -f "$work/g.dat" --create -s 1M --rounds 1 --paths engine,naive,h2d,host \
  >"$work/nogpu.out" 2>&1
rc=$?
[ $rc -eq 69 ] || bad "no GPU: exit $rc, not 69"
n=$(grep -c "libcuda" "$work/nogpu.out")
[ "$n" -eq 1 ] || bad "no GPU: libcuda's message on $n lines, not 1: $(cat "$work/nogpu.out")"
[ "$(grep -c "no GPU 0: see below" "$work/nogpu.out")" -eq 3 ] ||
  bad "no GPU: the GPU rows do not point to the message: $(cat "$work/nogpu.out")"

[ $status -eq 0 ] && echo "PASS: bench reads a file that is not a bench file with a note, -T runs each path that long, no GPU said once"
exit $status
