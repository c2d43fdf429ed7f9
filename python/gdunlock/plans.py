"""Plans: the reads a tensor, or an index of it, needs (plan_tensor), and
their submission into memory of a Target: one at a time (submit_plan, or
queue_plan then place_plan), small whole tensors of one file in one
request (submit_group), and PlanReads, what a Walk reads ahead through. No
torch at import: results are made through torch_bridge when they are
taken."""
import numbers

from ._lib import TARGET_HOST, GdunlockError
from .slicing import Runs, plan_read

# Whole tensors of up to GROUP_TENSOR bytes of one file read ahead together
# share one request, up to GROUP_READS of them (submit_group).
GROUP_TENSOR = 64 << 10
GROUP_READS = 256
_PLANS_KEPT = 4096


class Plan:
    """The reads a tensor, or an index of it, needs: runs (byte offset in the
    tensor, length) of the smallest box holding the result, the box's
    shape, and the index (post) that turns the box into the result (None:
    the box is the whole tensor). Plans compare equal when they read the
    same bytes into the same result."""

    def __init__(self, runs, box, post):
        self.runs, self.box, self.post = runs, box, post
        self.nbytes = runs.nbytes

    def __eq__(self, other):
        return isinstance(other, Plan) and (self.runs, self.box, self.post) == \
            (other.runs, other.box, other.post)

    __hash__ = None


def canonical(index):
    """index as predictions keep and compare it: a tuple (a lone entry is
    a tuple of one) of Python ints, slices of them, None and Ellipsis; None
    for an index they skip (advanced indexing, a 0-d tensor, slice bounds
    that are not integers). numpy's integers compare with == as arrays do,
    elementwise: a pattern that held one made the next comparison raise."""
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for i in items:
        if isinstance(i, slice):
            parts = (i.start, i.stop, i.step)
            if not all(p is None or _is_integer(p) for p in parts):
                return None
            out.append(slice(*(None if p is None else int(p) for p in parts)))
        elif i is None or i is Ellipsis:
            out.append(i)
        elif _is_integer(i):
            out.append(int(i))
        else:
            return None
    return tuple(out)


def _is_integer(i):
    """Python's and numpy's integers (numbers.Integral), not bools."""
    return isinstance(i, numbers.Integral) and not isinstance(i, bool)


def index_key(index):
    """index as a dict key (slices are unhashable before Python 3.12), or
    None for an index that is not worth keeping (canonical)."""
    items = canonical(index)
    if items is None:
        return None
    return tuple(("s", i.start, i.stop, i.step) if isinstance(i, slice) else i for i in items)


def same_index(a, b):
    """Whether indices a and b are the same (a slice and a tuple of it
    are); None is the whole tensor, the same as no index but None."""
    if a is None or b is None:
        return a is b
    key = index_key(a)
    return key is not None and key == index_key(b)


_plans = {}  # (shape, dtype, index key or whole tensor bytes) -> Plan: every layer asks alike


def _keep_plan(key, plan):
    if len(_plans) >= _PLANS_KEPT:
        _plans.clear()
    _plans[key] = plan


def _takes_the_box(box, post):
    """Whether index post of a box is all of it, as it is (a rank's rows)."""
    return len(post) == len(box) and all(
        isinstance(p, slice) and p.start == 0 and p.stop == n and p.step in (None, 1)
        for p, n in zip(post, box))


def plan_tensor(info, index=None):
    """The Plan of info (index None: the whole tensor), or None when index
    needs the whole tensor read first (advanced indexing: lists, masks)."""
    if index is None:  # kept too: a checkpoint of a million tensors has few shapes
        key = (info.shape, info.dtype, info.nbytes)
        plan = _plans.get(key)
        if plan is None:
            plan = Plan(Runs(0, [], info.nbytes), list(info.shape), None)
            _keep_plan(key, plan)
        return plan
    key = index_key(index)
    key = key and (info.shape, info.dtype, key)
    plan = _plans.get(key) if key else None
    if plan is None:
        try:
            runs, box, post = plan_read(list(info.shape), info.bits, index)
        except TypeError:
            return None
        if info.bits % 8 == 0 and _takes_the_box(box, post):
            post = None  # the box is the result: no view of it made per request
        plan = Plan(runs, box, post)
        if key:
            _keep_plan(key, plan)
    return plan


_box_dtypes = {}  # safetensors dtype -> the torch dtype its boxes are allocated in, or None


def box_dtype(info):
    """The torch dtype a box of tensor info is allocated in, so that the
    result needs no view made per request; None where the bytes come back
    raw or are planned in bytes (sub-byte dtypes, dtypes this torch
    lacks)."""
    try:
        return _box_dtypes[info.dtype]
    except KeyError:
        from .torch_bridge import torch_dtype
        dtype = _box_dtypes[info.dtype] = torch_dtype(info.dtype) if info.bits % 8 == 0 \
            else None
        return dtype


def forget():
    """Drops the plans and box dtypes worked out (what a fresh process has
    not; a stand-in for torch_bridge)."""
    _plans.clear()
    _box_dtypes.clear()


class Read:
    """A submitted read of a tensor (or a box of it) into buf: a tensor of
    the box's dtype and shape when typed, else its raw bytes."""

    def __init__(self, pending, buf, info, plan, typed):
        self.pending, self.buf, self.info, self.plan = pending, buf, info, plan
        self.typed = typed

    def result(self):
        self.pending.wait()
        box, post = self.plan.box, self.plan.post
        if self.typed:
            return self.buf if post is None else self.buf[post]
        from .torch_bridge import typed_view

        bits = self.info.bits
        if bits % 8:  # planned in bytes (plan_read)
            if post is None:
                return typed_view(self.buf, self.info.dtype, self.info.shape)
            part = self.buf.reshape(box)[post]
            return typed_view(part.contiguous().reshape(-1), self.info.dtype,
                              list(part.shape[:-1]) + [part.shape[-1] * 8 // bits])
        # Not typed: a dtype this torch lacks, which comes back as raw bytes,
        # as whole tensors do; a part of it is sliced through an integer
        # type of its width.
        if post is None:
            return self.buf
        import torch
        stand_in = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[bits // 8]
        part = self.buf.view(stand_in).reshape(box)[post]
        return part.contiguous().reshape(-1).view(torch.uint8)  # a strided part: its bytes


def queue_plan(reader, source, info, plan):
    """The reads of plan (of tensor info, in the file source, a FileRef)
    queued on reader, their memory to come (place_plan)."""
    return reader.submit_runs_deferred(source, plan.runs, info.file_offset)


def place_plan(pending, target, info, plan):
    """The memory of a queued read (queue_plan) allocated on target and
    given to it; returns the Read. A failed allocation cancels the read
    before the error goes up."""
    dtype = box_dtype(info)

    def allocate():
        buf = target.empty(plan.nbytes, dtype, plan.box)
        return buf.data_ptr(), buf
    return Read(pending, pending.fill(allocate), info, plan, dtype is not None)


def submit_plan(reader, target, source, info, plan):
    """Queues the reads of plan into fresh memory of target; returns the
    Read. The reads are queued first and the memory allocated while the
    engine reads: a process's first tensors otherwise waited for fresh
    blocks of torch's from the driver with the engine idle
    (bench/results/2026-12-04-h200-engine-trace.md)."""
    return place_plan(queue_plan(reader, source, info, plan), target, info, plan)


def groupable(target, info, plan):
    """Whether plan reads all of tensor info, small enough to share a
    request with others (submit_group), into host memory. A GPU's reads are
    queued before their memory is allocated, which overlaps them (a
    process's first blocks came from the driver slowly); on the host a
    small tensor's memory is a malloc."""
    return target.target == TARGET_HOST and plan.post is None and plan.runs.count == 1 and \
        plan.nbytes == info.nbytes and plan.nbytes <= GROUP_TENSOR


def submit_group(reader, target, source, members):
    """Reads the whole tensors members [(info, plan)] of the file source
    (each groupable) in one request, each into its own fresh memory of
    target; returns their Reads. Their memory is allocated first: each is
    small, and a request of many saves the engine's submit, placement and
    wait per tensor, which for a tensor of a few bytes cost several times
    its read."""
    bufs, runs = [], []
    for info, plan in members:
        buf = target.empty(plan.nbytes, box_dtype(info), plan.box)
        bufs.append(buf)
        runs.append((info.file_offset + plan.runs.base, plan.nbytes, buf.data_ptr()))
    shared = SharedWait(reader.submit(source, runs, bufs))
    return [Read(shared, buf, info, plan, box_dtype(info) is not None)
            for (info, plan), buf in zip(members, bufs)]


class SharedWait:
    """The one read of a group of tensors (submit_group): waited for once,
    its error raised to each of them."""

    def __init__(self, pending):
        self._pending, self._error, self._done = pending, None, False

    def wait(self):
        if not self._done:
            try:
                self._pending.wait()
            except GdunlockError as e:
                self._error = e
            self._done = True
        if self._error is not None:
            raise self._error


def settle(reads):
    """Waits for reads nobody will take (read ahead, then not asked for)."""
    for read in reads:
        try:
            read.pending.wait()
        except GdunlockError:
            pass


class PlanReads:
    """What a Walk reads ahead through: reads of a file's tensors (files,
    its FileRefs) into memory of target, through the reader reader_of()
    returns (called under the caller's lock)."""

    def __init__(self, reader_of, target, files):
        self._reader_of, self.target, self._files = reader_of, target, files

    def queue(self, info, plan):
        return queue_plan(self._reader_of(), self._files[info.file], info, plan)

    def place(self, pending, info, plan):
        return place_plan(pending, self.target, info, plan)

    def cancel(self, pending):
        pending.cancel()

    def groupable(self, info, plan):
        return groupable(self.target, info, plan)

    def group(self, members):
        return submit_group(self._reader_of(), self.target, self._files[members[0][0].file],
                            members)

    def reserve(self, sizes):
        self.target.reserve(sizes)

    def submit(self, info, plan):
        return submit_plan(self._reader_of(), self.target, self._files[info.file], info, plan)
