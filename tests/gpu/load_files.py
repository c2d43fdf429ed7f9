#!/usr/bin/env python3
"""GPU check of issue 22, item 1 (C side): a GPU load reads the files whose
headers gdu_st_open validated. A two-shard checkpoint is opened, one shard
is replaced by rename with a file of the same layout and other values, then
the checkpoint is loaded into GPU 0 (the engine opens each file from the
descriptor the model kept: gdu_io_open_fd, O_DIRECT and cuFile through
/proc/self/fd) and verified; every tensor must hold the validated values.
One PASS/FAIL/SKIP line, for the backend in GDUNLOCK_IO_BACKEND."""
import argparse
import json
import os
import shutil

import torch
from safetensors.torch import save_file

import gdunlock
from gdunlock.torch_bridge import to_torch

TENSORS, ROWS = 8, 1024  # 8 x 4 MiB of F32 a shard


def write(folder, gen):
    os.makedirs(folder, exist_ok=True)
    weight_map = {}
    for s in range(2):
        name = f"model-{s + 1:05d}-of-00002.safetensors"
        tensors = {f"s{s}.t{i}": torch.full((ROWS, ROWS), float(gen * 1000 + s * 100 + i))
                   for i in range(TENSORS)}
        save_file(tensors, os.path.join(folder, name))
        weight_map.update({k: name for k in tensors})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": weight_map}, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    backend = os.environ.get("GDUNLOCK_IO_BACKEND", "auto")
    ckpt, other = os.path.join(a.dir, "ckpt"), os.path.join(a.dir, "gen1")
    shutil.rmtree(a.dir, ignore_errors=True)
    write(ckpt, 0)
    write(other, 1)
    shard = "model-00002-of-00002.safetensors"
    try:
        with gdunlock.Checkpoint(os.path.join(ckpt, "model.safetensors.index.json")) as c:
            os.replace(os.path.join(other, shard), os.path.join(ckpt, shard))
            c.load(0)
            c.verify()
            stats = c.stats()
            wrong = []
            for i, info in enumerate(c.tensors()):
                s, t = (int(x[1:]) for x in info.name.split("."))
                if not torch.all(to_torch(c, i, info) == float(s * 100 + t)):
                    wrong.append(info.name)
    except gdunlock.GdunlockError as e:
        missing = "cufile" in str(e) and ("not found" in str(e) or "unavailable" in str(e))
        print(f"{'SKIP' if missing else 'FAIL'} load-files-{backend}: {e}")
        return
    finally:
        shutil.rmtree(a.dir, ignore_errors=True)
    ok = not wrong and stats["backend"].startswith(backend if backend != "auto" else "")
    listed = ": " + ", ".join(wrong[:4]) if wrong else ""
    print(f"{'PASS' if ok else 'FAIL'} load-files-{backend}: GPU load and verify after shard 2 was "
          f"replaced by rename: {len(wrong)} of {stats['tensors']} tensors differ from the "
          f"validated files{listed}; path {stats['backend']}: {stats['reason']}")


if __name__ == "__main__":
    main()
