"""`gdunlock load --to host --list --json` of a large header takes little
more memory than the same load without --list: the tensor table is written
one tensor at a time. Building it as one JSON tree first took 2.5 x the
load's peak on a million tensors (1.59 GB against 0.63 GB; json.loads of
that header: 0.76 GB). Peaks are each child's own (os.wait4), in one run.

Usage: list_memory.py GDUNLOCK"""
import json
import os
import struct
import subprocess
import sys
import tempfile

TENSORS = 100_000
BOUND = 1.25  # the list may add this much to the load's peak


def write_checkpoint(path):
    header = {f"model.layers.{i // 10}.block.{i % 10}.weight":
              {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
              for i in range(TENSORS)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(bytes(4 * TENSORS))


def peak_kib(argv):
    """The child's exit status and its peak resident set (KiB); its JSON
    on stdout goes to a file, checked to hold every tensor."""
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        err = child.stderr.read().decode(errors="replace")
        child.stderr.close()
        out.seek(0)
        doc = json.load(out) if child.returncode == 0 else None
    return child.returncode, usage.ru_maxrss, doc, err


def main():
    gdunlock = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "many.safetensors")
        write_checkpoint(path)
        base = [gdunlock, "load", "--to", "host", "--json", path]
        rc, plain, doc, err = peak_kib(base)
        if rc != 0 or doc["tensors"] != TENSORS:
            sys.exit(f"FAIL: load without --list: exit {rc}: {err}")
        rc, listed, doc, err = peak_kib(base + ["--list"])
        if rc != 0 or len(doc["tensor_table"]) != TENSORS:
            sys.exit(f"FAIL: load --list: exit {rc}: {err}")
        last = doc["tensor_table"][-1]
        if last["name"] != f"model.layers.{(TENSORS - 1) // 10}.block.9.weight":
            sys.exit(f"FAIL: the table's last tensor is {last['name']}")
    ratio = listed / plain
    print(f"peak RSS of {TENSORS} tensors: load {plain} KiB, load --list {listed} KiB, "
          f"{ratio:.2f} x (bound {BOUND} x)")
    if ratio > BOUND:
        sys.exit("FAIL: --list --json holds the whole table in memory")


if __name__ == "__main__":
    main()
