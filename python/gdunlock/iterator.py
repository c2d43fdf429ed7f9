"""weights_iterator: (name, tensor) pairs of a checkpoint for serving
engines, each rank reading only its share of the tensors it shards, with a
bounded amount of memory read ahead of the consumer."""
import glob
import math
import os
import re
from collections import deque

from ._lib import GdunlockError
from .checkpoint import Checkpoint
from .safe_open import Target, submit_tensor

DEFAULT_MEMORY_BUDGET = 2 << 30


def _expand(files):
    """Paths: one path or a list; a folder means its *.safetensors files."""
    if isinstance(files, (str, bytes, os.PathLike)):
        files = [files]
    out = []
    for f in files:
        f = os.fspath(f)
        if os.path.isdir(f):
            found = sorted(glob.glob(os.path.join(f, "*.safetensors")))
            if not found:
                raise GdunlockError("GDU_ST_ERR_OPEN", f"{f}: no .safetensors files in it")
            out += found
        else:
            out.append(f)
    if not out:
        raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", "no checkpoint files given")
    return out


def _shard_rule(shard):
    """shard -> function(name, shape) giving the dimension to split or None."""
    if shard is None:
        return lambda name, shape: None
    if callable(shard):
        return shard
    if isinstance(shard, dict):
        rules = [(re.compile(p), d) for p, d in shard.items()]
        return lambda name, shape: next((d for p, d in rules if p.search(name)), None)
    raise TypeError("shard is None, a function (name, shape) -> dim or None, or a dict "
                    "{regular expression: dim}")


def rank_index(shape, dim, rank, world_size):
    """The index of rank's part of a tensor split world_size ways along dim,
    as torch.chunk splits it (parts of ceil(n / world_size); the last ones
    may be shorter, or empty)."""
    n = shape[dim]
    size = math.ceil(n / world_size) if n else 0
    start = min(rank * size, n)
    return (slice(None),) * dim + (slice(start, min(start + size, n)),)


def weights_iterator(files, device=0, rank=0, world_size=1, shard=None,
                     memory_budget=DEFAULT_MEMORY_BUDGET, lenient=False):
    """Yields (name, tensor) for every tensor of files (a path, a list, a
    folder of .safetensors files, or a sharded index JSON), file by file in
    the order of their bytes.

    shard says which tensors each rank splits and along which dimension: a
    function (name, shape) -> dim or None, or a dict {regular expression:
    dim}; rank `rank` of `world_size` then gets its torch.chunk part of those
    tensors (only those bytes are read) and the whole of the others.

    memory_budget bounds the bytes read ahead of the consumer: tensors not
    yet handed out (at least one is always in flight). Each tensor is its own
    allocation and belongs to the consumer once yielded: copy it into the
    parameter and drop it, and its memory is free for the next reads; the
    iterator never holds a second copy of the checkpoint."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
    rule = _shard_rule(shard)
    target = Target(device)
    reader = target.reader()
    try:
        items = []
        for path in _expand(files):
            with Checkpoint(path, lenient=lenient) as ckpt:
                names = ckpt.files
                for t in sorted(ckpt.tensors(), key=lambda t: (t.file, t.file_offset)):
                    dim = rule(t.name, t.shape) if world_size > 1 else None
                    if dim is not None and not -len(t.shape) <= dim < len(t.shape):
                        raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT",
                                            f"shard dimension {dim} for {t.name} of shape "
                                            f"{list(t.shape)}")
                    index = None if dim is None else \
                        rank_index(t.shape, dim % len(t.shape), rank, world_size)
                    items.append((names[t.file], t, index))
        queue, ahead = deque(), 0
        next_item = 0
        while next_item < len(items) or queue:
            while next_item < len(items) and (not queue or ahead < memory_budget):
                path, info, index = items[next_item]
                read = submit_tensor(reader, target, path, info, index)
                if read is None:  # needs the whole tensor first (sub-byte dtypes)
                    read = submit_tensor(reader, target, path, info)
                    read.post = index
                queue.append(read)
                ahead += read.buf.numel()
                next_item += 1
            read = queue.popleft()
            ahead -= read.buf.numel()
            tensor = read.result()
            yield read.info.name, tensor
            del tensor, read
    finally:
        reader.close()
