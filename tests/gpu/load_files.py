#!/usr/bin/env python3
"""GPU check of issue 22, item 1 (C side): a GPU load reads the files whose
headers gdu_st_open validated. A two-shard checkpoint is opened, then shard 2
is changed and the checkpoint is loaded into GPU 0 (the engine opens each file
from the descriptor the model kept: gdu_io_open_fd) and verified.
- replaced: shard 2 replaced by rename with a file of the same layout and
  other values. Every tensor must hold the validated values (the pipeline);
  under GDUNLOCK_IO_BACKEND=cufile the load must refuse the shard, naming the
  cause: libcufile opens a registered file again by its name, which the
  validated file no longer has (its CU_FILE_GETNEWFD_FAILED, 5031).
- renamed (cufile only): shard 2 renamed within its folder: libcufile finds
  it under its new name; the load goes through cuFile with the right values.
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


def load(ckpt, change):
    """Opens ckpt, applies change, loads into GPU 0; (stats, tensors that
    differ from the validated values)."""
    with gdunlock.Checkpoint(os.path.join(ckpt, "model.safetensors.index.json")) as c:
        change()
        c.load(0)
        c.verify()
        stats = c.stats()
        wrong = []
        for i, info in enumerate(c.tensors()):
            s, t = (int(x[1:]) for x in info.name.split("."))
            if not torch.all(to_torch(c, i, info) == float(s * 100 + t)):
                wrong.append(info.name)
    return stats, wrong


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    backend = os.environ.get("GDUNLOCK_IO_BACKEND", "auto")
    ckpt, other = os.path.join(a.dir, "ckpt"), os.path.join(a.dir, "gen1")
    shard = "model-00002-of-00002.safetensors"

    def replace():
        os.replace(os.path.join(other, shard), os.path.join(ckpt, shard))

    def rename():
        os.rename(os.path.join(ckpt, shard), os.path.join(ckpt, "moved.safetensors"))

    notes, ok = [], True
    try:
        for name, change in (("replaced", replace), ("renamed", rename)):
            if name == "renamed" and backend != "cufile":
                continue
            shutil.rmtree(a.dir, ignore_errors=True)
            write(ckpt, 0)
            write(other, 1)
            try:
                stats, wrong = load(ckpt, change)
            except gdunlock.GdunlockError as e:
                text = str(e)
                if "cufile" in text and ("not found" in text or "unavailable" in text):
                    print(f"SKIP load-files-{backend}: {e}")
                    return
                refused = (backend == "cufile" and name == "replaced" and
                           "deleted or replaced since it was opened" in text)
                ok = ok and refused
                notes.append(f"{name}: {'refused as it must be' if refused else 'error'}: {e}")
                continue
            good = not wrong and stats["backend"].startswith(
                backend if backend != "auto" else "")
            ok = ok and good
            listed = ": " + ", ".join(wrong[:4]) if wrong else ""
            notes.append(f"{name}: {len(wrong)} of {stats['tensors']} tensors differ from the "
                         f"validated files{listed}; path {stats['backend']}: {stats['reason']}")
    finally:
        shutil.rmtree(a.dir, ignore_errors=True)
    print(f"{'PASS' if ok else 'FAIL'} load-files-{backend}: GPU load and verify after shard 2 "
          f"was changed; " + "; ".join(notes))


if __name__ == "__main__":
    main()
