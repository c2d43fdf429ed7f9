"""weights_iterator: (name, tensor) pairs of a checkpoint for serving
engines, each rank reading only its share of the tensors it shards (and
none of the tensors it does not select), with a bounded amount of memory
read ahead of the consumer."""
import glob
import math
import os
import re
import sys
import time
from collections import deque

from ._lib import GdunlockError
from .checkpoint import Checkpoint
from .slicing import SliceError
from .plans import GROUP_READS, groupable, plan_tensor, submit_group, submit_plan
from .target import Target

DEFAULT_MEMORY_BUDGET = 2 << 30
# Reads in flight at most, whatever their bytes: the tensors of a checkpoint
# of small ones (a million of 4 bytes) were otherwise all submitted at the
# first, each one's memory, request and file handle held until handed out.
# Kept small enough that the reads out are not what Python's collector
# finds alive at each young collection: those it moves to its oldest
# generation, and every full collection of a process with torch loaded
# walks all of torch's objects too (a walk of 10,000 small shards made
# two of them with 1,024 reads out, one with 256).
READS_AHEAD = 256


def inside_model_folder(path, folder):
    """path, a file listed in model folder `folder`, when it resolves
    (links followed) inside folder, or, for a Hugging Face cache snapshot
    (.../snapshots/REV, whose files link to ../../blobs/HASH), inside that
    repository's blobs/: the rule an index's shards follow (the C loader's
    check_inside). Otherwise GdunlockError GDU_ST_ERR_PATH_ESCAPE: a model
    folder does not reach files elsewhere. The path is checked, not the
    descriptor later opened (a link swapped in between is not seen)."""
    root, real = os.fsdecode(os.path.realpath(folder)), os.fsdecode(os.path.realpath(path))
    snapshots, rev = os.path.split(root)
    within = [root]
    if os.path.basename(snapshots) == "snapshots" and rev:
        within.append(os.path.join(os.path.dirname(snapshots), "blobs"))
    if not any(real.startswith(w.rstrip(os.sep) + os.sep) for w in within):
        raise GdunlockError("GDU_ST_ERR_PATH_ESCAPE",
                            f"{os.fsdecode(path)} resolves to {real}, outside the model folder "
                            f"{os.fsdecode(folder)}: the files of a model folder must lie under "
                            f"it, as an index's shards must")
    return path


def _expand(files):
    """Paths: one path or a list; a folder means its *.safetensors files,
    each inside it (inside_model_folder). A file named twice (by two paths)
    is read once."""
    if isinstance(files, (str, bytes, os.PathLike)):
        files = [files]
    out, seen = [], set()
    for f in files:
        f = os.fspath(f)
        found = [f]
        if os.path.isdir(f):
            pattern = b"*.safetensors" if isinstance(f, bytes) else "*.safetensors"
            found = [inside_model_folder(p, f)
                     for p in sorted(glob.glob(os.path.join(glob.escape(f), pattern)))]
            if not found:
                raise GdunlockError("GDU_ST_ERR_OPEN", f"{os.fsdecode(f)}: no .safetensors "
                                    f"files in it")
        for path in found:
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                out.append(path)
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


def _select_rule(select):
    """select -> function(name) saying whether the tensor is read at all."""
    if select is None:
        return lambda name: True
    if callable(select):
        return select
    if isinstance(select, (str, re.Pattern)):
        pattern = re.compile(select)
        return lambda name: pattern.search(name) is not None
    raise TypeError("select is None, a function name -> bool, or a regular expression")


def _whole_number(value, what, least):
    if isinstance(value, bool) or not hasattr(value, "__index__") or value.__index__() < least:
        raise ValueError(f"{what} must be an integer >= {least}, not {value!r}")
    return value.__index__()


def rank_index(shape, dim, rank, world_size):
    """The index of rank's part of a tensor split world_size ways along dim,
    as torch.chunk splits it (parts of ceil(n / world_size); the last ones
    may be shorter, or empty)."""
    n = shape[dim]
    size = math.ceil(n / world_size) if n else 0
    start = min(rank * size, n)
    return (slice(None),) * dim + (slice(start, min(start + size, n)),)


class _Progress:
    """progress=True: a tqdm bar of bytes when tqdm is installed, else a
    line on stderr at most twice a second; a callable gets (bytes done,
    bytes known so far, name) after each tensor. The total grows as the
    iterator reaches each file's header."""

    def __init__(self, progress):
        self.call, self.bar, self.line = None, None, False  # a bar: a tqdm; line: on stderr
        self.total, self.done, self.shown = 0, 0, 0.0
        if callable(progress):
            self.call = progress
        elif progress:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(total=0, unit="B", unit_scale=True, desc="gdunlock")
            except ImportError:
                self.line = True

    def grow(self, nbytes):
        self.total += nbytes
        if self.bar is not None:  # (a tqdm of total 0 is falsy: never tested for truth)
            self.bar.total = self.total
            self.bar.refresh()

    def step(self, nbytes, name, last):
        self.done += nbytes
        if self.call is not None:
            self.call(self.done, self.total, name)
        elif self.bar is not None:
            self.bar.update(nbytes)
        elif self.line and (time.monotonic() - self.shown > 0.5 or last):
            self.shown = time.monotonic()
            sys.stderr.write(f"\rgdunlock: {self.done / 1e9:.2f} of {self.total / 1e9:.2f} GB")
            if last:
                sys.stderr.write("\n")
            sys.stderr.flush()

    def close(self):
        if self.bar is not None:
            self.bar.close()


class WeightsIterator:
    """What weights_iterator returns: an iterator of (name, tensor), with
    stats() and close() (also called when it is exhausted or dropped).

    Files are opened as the reads reach them and closed once their last
    tensor is handed out, so that a folder of more shards than the process
    may open descriptors is read all the same; each file's reads go through
    the descriptor its header was validated from."""

    def __init__(self, paths, plan_files, target, memory_budget, progress):
        self._paths, self._plan_files = deque(paths), plan_files
        # (checkpoint, its files' plans) while some of its files are not
        # planned yet: a checkpoint's files are planned as the reads reach
        # them, not all at its opening
        self._planning = None
        self._target, self._budget = target, memory_budget
        self._reader = target.reader()
        self._items = deque()  # (FileRef, info, plan) planned, not yet submitted
        self._queue, self._ahead = deque(), 0  # submitted, not yet handed out
        self._open = deque()  # [checkpoint, tensors not yet handed out]
        self._progress = _Progress(progress)
        self.skipped = 0
        self._bytes = self._requests = 0  # the reader's counts, kept when it closes

    def __iter__(self):
        return self

    def __next__(self):
        if self._reader is None:
            raise StopIteration
        try:
            read = self._take()
            tensor = None if read is None else read.result()
        except BaseException:
            self.close()
            raise
        if read is None:
            self.close()
            raise StopIteration
        self._handed_out()
        self._progress.step(read.plan.nbytes, read.info.name, not self._queue and
                            not self._items and not self._paths and self._planning is None)
        return read.info.name, tensor

    def _plan_next_file(self):
        """Plans the reads of the next file, opening the next checkpoint
        after the last file of one; False when none is left."""
        if self._planning is None:
            if not self._paths:
                return False
            self._planning = self._plan_files(self._paths.popleft())
        ckpt, files = self._planning
        items, skipped, last = next(files)
        if last:
            self._planning = None
        self.skipped += skipped
        # a checkpoint closes once the last tensor of its last file is out
        if items:
            self._open.append([ckpt if last else None, len(items)])
            self._items.extend(items)
            self._progress.grow(sum(plan.nbytes for _, _, plan in items))
        elif last and self._open:
            self._open.append([ckpt, 0])
        elif last:
            ckpt.close()
        return True

    def _take(self):
        """The next tensor's read (None at the end), after submitting reads
        ahead up to the budget."""
        batch, ahead = [], self._ahead
        # topped up by count once half the reads are handed out, so that
        # small tensors go in groups (submit_group), not one by one
        room = READS_AHEAD if len(self._queue) <= READS_AHEAD // 2 else 0
        while not (self._queue or batch) or (ahead < self._budget and
                                             len(self._queue) + len(batch) < room):
            if not self._items and not self._plan_next_file():
                break
            if self._items:
                batch.append(self._items.popleft())
                ahead += batch[-1][2].nbytes
        self._target.reserve([plan.nbytes for _, _, plan in batch])
        group = []  # small whole tensors of one file, read in one request
        for k, (source, info, plan) in enumerate(batch):
            if groupable(self._target, info, plan):
                group.append((info, plan))
                last = k + 1 == len(batch) or batch[k + 1][0] is not source or \
                    not groupable(self._target, *batch[k + 1][1:]) or len(group) == GROUP_READS
                if last:
                    self._queue.extend(submit_group(self._reader, self._target, source, group))
                    group = []
            else:
                self._queue.append(submit_plan(self._reader, self._target, source, info, plan))
            self._ahead += plan.nbytes
        if not self._queue:
            return None
        read = self._queue.popleft()
        self._ahead -= read.plan.nbytes
        return read

    def _handed_out(self):
        """One tensor handed out: its checkpoint closes after its last one."""
        self._open[0][1] -= 1
        while self._open and self._open[0][1] == 0:
            ckpt = self._open.popleft()[0]
            if ckpt is not None:
                ckpt.close()

    def stats(self):
        """Bytes asked of the engine, in how many requests, and the tensors
        select= left out (none of their bytes read)."""
        r = self._reader
        return {"bytes_read": r.bytes_read if r else self._bytes, "requests": r.requests if r
                else self._requests, "skipped": self.skipped}

    def close(self):
        """Waits for the reads still out and gives the engine lease back."""
        reader, self._reader = self._reader, None
        if reader is not None:
            self._bytes, self._requests = reader.bytes_read, reader.requests
            self._queue.clear()
            self._items.clear()
            reader.close()
            self._progress.close()
            while self._open:
                ckpt = self._open.popleft()[0]
                if ckpt is not None:
                    ckpt.close()
            if self._planning is not None:
                self._planning[0].close()
                self._planning = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _rank_plan(t, dim, rank, world_size):
    """The plan of rank's part of tensor t split world_size ways along dim
    (all of it for dim None)."""
    if dim is None:
        return plan_tensor(t)
    if isinstance(dim, bool) or not isinstance(dim, int) or \
            not -len(t.shape) <= dim < len(t.shape):
        raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", f"shard dimension {dim!r} for "
                            f"{t.name} of shape {list(t.shape)}")
    try:
        return plan_tensor(t, rank_index(t.shape, dim % len(t.shape), rank, world_size))
    except SliceError as e:
        raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT",
                            f"cannot shard {t.name} ({t.dtype}, {t.bits} bits, shape "
                            f"{list(t.shape)}) {world_size} ways along dimension {dim}: "
                            f"{e.message}") from None


def weights_iterator(files, device="cuda:0", rank=0, world_size=1, shard=None,
                     memory_budget=DEFAULT_MEMORY_BUDGET, lenient=False, select=None,
                     progress=False):
    """Yields (name, tensor) for every tensor of files (a path, a list, a
    folder of .safetensors files, or a sharded index JSON), file by file in
    the order of their bytes, onto device: the first GPU unless told
    ("cuda:N" or N, or "cpu" for host memory).

    shard says which tensors each rank splits and along which dimension: a
    function (name, shape) -> dim or None, or a dict {regular expression:
    dim}; rank `rank` of `world_size` then gets its torch.chunk part of those
    tensors (only those bytes are read) and the whole of the others.

    select (a function name -> bool, or a regular expression searched in
    the name) leaves tensors out before any byte is read: an expert-parallel
    rank skips the other ranks' experts.

    memory_budget bounds the bytes read ahead of the consumer: tensors not
    yet handed out (at least one is always in flight). Each tensor is its own
    allocation and belongs to the consumer once yielded: copy it into the
    parameter and drop it, and its memory is free for the next reads; the
    iterator never holds a second copy of the checkpoint.

    progress=True shows a tqdm bar (a line on stderr without tqdm); a
    callable is called with (bytes done, bytes in all, name) after each
    tensor."""
    world_size = _whole_number(world_size, "world_size", 1)
    rank = _whole_number(rank, "rank", 0)
    memory_budget = _whole_number(memory_budget, "memory_budget", 0)
    if rank >= world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
    rule, keep = _shard_rule(shard), _select_rule(select)
    target = Target(device)
    def plan_files(path):
        """(the open checkpoint of path, an iterator giving for each of its
        files in turn ([(FileRef, info, plan)] in byte order, tensors
        select= left out, whether it is the last file))."""
        ckpt = Checkpoint(path, lenient=lenient)
        return ckpt, plan_each_file(ckpt)

    def plan_each_file(ckpt):
        count = ckpt.file_count
        for k, (source, tensors) in enumerate(ckpt.tensors_by_file()):
            items, skipped = [], 0
            for t in tensors:
                if keep(t.name):
                    dim = rule(t.name, t.shape) if world_size > 1 else None
                    items.append((source, t, _rank_plan(t, dim, rank, world_size)))
                else:
                    skipped += 1
            yield items, skipped, k + 1 == count

    return WeightsIterator(_expand(files), plan_files, target, memory_budget, progress)
