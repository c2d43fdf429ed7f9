"""Reading byte ranges of checkpoint files through the process's kept I/O
engines (a lease each, given back on close), and the byte ranges a basic
index of a tensor needs. No torch here: memory is an address."""
import _thread
import array
import ctypes
import errno
import math
import numbers
import os
import threading
import weakref

from ._lib import IO_OP_READ, GdunlockError, IoExtent, StError, TARGET_HOST, check, lib


class SliceError(GdunlockError, IndexError):
    """An index a tensor cannot take (out of range, more indices than
    dimensions): a GdunlockError that is also an IndexError."""

    def __init__(self, message):
        super().__init__("GDU_ST_ERR_SLICE", message)


class SliceStepError(SliceError, ValueError):
    """A slice step <= 0: also a ValueError, as torch and safetensors raise."""


# What a Pending's byte count holds until gdu_io_wait has freed its request:
# it writes the count before it returns.
_NOT_WAITED = (1 << 64) - 1


class Pending:
    """One submitted read; wait() for it (close() of its reader waits for
    those left). It holds the destination (keep) until then: memory freed
    under a running read would be written after its reuse. A read
    submitted before its memory (RangeReader.submit_runs_deferred) gets it
    with place(), or cancel() when it cannot be had; fill() allocates and
    places in one step.

    A KeyboardInterrupt can land between any two calls of the thread that
    waits or places (Ctrl-C during a read), and close() must still find
    every read in a state it can finish: the thread that waits or
    allocates holds the read's own lock (released however the thread
    leaves), and the engine's byte count says whether the engine has
    freed the request already."""

    def __init__(self, reader, key, extents, request, nbytes, keep, unplaced=False):
        self._reader, self._extents, self._request, self.nbytes = reader, extents, request, nbytes
        self.key, self._keep, self.unplaced = key, keep, unplaced
        self._busy = _thread.allocate_lock()
        self._done = ctypes.c_uint64(_NOT_WAITED)

    def place(self, address, keep):
        """Gives a deferred read its memory at address (keep owns it)."""
        with self._busy:
            self._keep = keep
            self._reader._place(self, address)

    def fill(self, allocate):
        """Gives a deferred read the memory allocate() returns (address, the
        object owning it) and returns that object; when allocate raises, the
        read is cancelled and the error goes up. A close() from another
        thread waits until the memory is given; a deferred read left
        unplaced outside fill() is cancelled by close()."""
        with self._busy:
            try:
                address, keep = allocate()
            except BaseException:
                self._cancel()
                raise
            self._keep = keep
            self._reader._place(self, address)
        return keep

    def cancel(self):
        """A deferred read that gets no memory (its allocation failed):
        cancelled, nothing written, and waited for."""
        with self._busy:
            self._cancel()

    def _cancel(self):
        """cancel() under the read's lock."""
        if self._request is not None:  # else close() waited for it: cancelled already
            self._reader._place(self, None)
            self._wait()  # -ECANCELED, as asked

    def wait(self):
        """Waits for the read; once it was waited for (by another thread,
        or by close()) returns at once. A deferred read still without its
        memory is cancelled by the engine."""
        with self._busy:
            rc, why = self._wait()
        if rc:
            raise GdunlockError("GDU_ST_ERR_ENGINE", why.value.decode(errors="replace"))
        if rc is not None and self._done.value != self.nbytes:
            raise GdunlockError("GDU_ST_ERR_IO", f"read {self._done.value} of {self.nbytes} "
                                f"bytes (file truncated while loading?)")

    def _wait(self):
        """wait() under the read's lock: (the engine's status, its reason),
        (None, None) when waited for already."""
        request = self._request
        if request is None:
            return None, None
        why = ctypes.create_string_buffer(512)
        rc = 0
        if self._done.value == _NOT_WAITED:  # else freed for a waiter an interrupt stopped
            rc = self._reader._lib.gdu_io_wait(request, ctypes.byref(self._done), why, len(why))
        self._request = None
        self.unplaced = False
        self._reader._forget(self)
        self._keep = None
        return rc, why


# Every RangeReader alive. A thread of the parent that held a reader's lock
# or a read's when another thread forked holds it for ever in the child,
# where only the forking thread exists: the child makes them anew (its
# reads through the parent's engine then fail at once, naming the fork).
_alive = weakref.WeakSet()


def _new_locks_in_child():
    for r in list(_alive):
        r._lock = threading.Lock()
        for p in r._pending:
            p._busy = _thread.allocate_lock()


os.register_at_fork(after_in_child=_new_locks_in_child)


class RangeReader:
    """Reads file ranges into memory of one target: host memory
    (target=TARGET_HOST) or GPU `device`'s memory. At most max_open files
    stay open on the engine at once: the least recently used one with no
    read out is closed when another is needed (a checkpoint may have more
    shards than the process may open descriptors)."""

    def __init__(self, target, device, max_open=64):
        self._lib = lib()
        self.host = target == TARGET_HOST
        self.device = device
        self._engine = ctypes.c_void_p()
        err = StError()
        check(self._lib.gdu_st_engine_acquire(1 if self.host else 0, 0 if self.host else device,
                                              ctypes.byref(self._engine), ctypes.byref(err)), err)
        self._files = {}  # FileRef.key -> [handle, reads out], least recently used first
        # the keys of _files with no read out, least recently used first:
        # those a new file may close (looking through _files for them cost
        # every open the number of files with reads out)
        self._closable = {}
        self._max_open = max(1, max_open)
        self._pending = set()  # submitted and not waited for to the end
        self._lock = threading.Lock()
        self._closing = False
        self.bytes_read = 0
        self.requests = 0
        _alive.add(self)

    def _file(self, source):
        """Under the lock: source's open handle, opened (and the set
        trimmed) if needed."""
        entry = self._files.pop(source.key, None)
        if entry is None:
            excess = len(self._files) + 1 - self._max_open
            while excess > 0 and self._closable:
                k = next(iter(self._closable))
                del self._closable[k]
                self._lib.gdu_io_close(self._files.pop(k)[0])
                excess -= 1
            entry = [source.open_on(self._engine), 0]
        self._files[source.key] = entry  # most recently used last
        if not entry[1]:
            self._closable.pop(source.key, None)
            self._closable[source.key] = None
        return entry

    def submit(self, source, runs, keep=None):
        """Queues reads of runs [(file offset, length, address)] from source
        (a FileRef: the file its checkpoint validated); keep (the object
        owning that memory) is held until the read is waited for."""
        extents = (IoExtent * max(len(runs), 1))()
        for i, (offset, length, address) in enumerate(runs):
            extents[i].offset, extents[i].length, extents[i].mem = offset, length, address
        return self._queue(source, len(runs), sum(length for _, length, _ in runs), keep,
                           lambda f, out: self._lib.gdu_io_submit(f, IO_OP_READ, extents,
                                                                  len(runs), None, None, out),
                           extents)

    def submit_runs_deferred(self, source, runs, at):
        """Queues the read of runs (a Runs), shifted by file offset at, into
        memory given later (Pending.place), one run after another: a box
        whose extents the engine makes, where building a column's 4,096 of
        them here cost 19 us a request (issue 21). The engine reads into
        its staging at once and copies once the memory is given, so that
        the caller's allocation overlaps the reads: a process's first
        tensors waited for torch's first blocks from the driver with the
        engine idle."""
        counts, strides, nd, length = runs.box()
        return self._queue(source, runs.count, runs.nbytes, None,
                           lambda f, out: self._lib.gdu_io_submit_box_deferred(
                               f, runs.base + at, counts, strides, nd, length, None, None, out),
                           deferred=True)

    def _queue(self, source, n, total, keep, submit, extents=None, deferred=False):
        """Submits a read of n ranges, total bytes, from source through
        submit(file handle, request pointer), which returns the engine's
        status; extents (what the engine reads them from) and keep are held
        until the read is waited for; a deferred one counts as unplaced
        until placed."""
        request = ctypes.c_void_p()
        with self._lock:
            if self._engine is None or self._closing:
                raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", "the reader is closed")
            entry = self._file(source)
            rc = submit(entry[0], ctypes.byref(request))
            if rc != 0:
                forked = " (it is the parent process's: this process was forked from it after " \
                    "this was opened; open it again here)" if rc == -errno.ESRCH else ""
                raise GdunlockError("GDU_ST_ERR_ENGINE", f"{source.path}: the engine refused "
                                    f"the read ({n} ranges, {total} bytes){forked}")
            entry[1] += 1
            self._closable.pop(source.key, None)
            pending = Pending(self, source.key, extents, request, total, keep, deferred)
            self._pending.add(pending)
            self.bytes_read += total
            self.requests += 1
        return pending

    def _place(self, pending, address):
        """pending's memory given (address None: cancelled), once, under
        pending's lock."""
        with self._lock:
            if pending._request is None:  # close() waited for it: the engine cancelled it
                raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", "the reader is closed")
            if not pending.unplaced:
                raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", "the read has its memory "
                                    "already, or was not submitted without it")
            rc = self._lib.gdu_io_place(pending._request, address)
            pending.unplaced = False
        if rc != 0:
            raise GdunlockError("GDU_ST_ERR_ENGINE", f"the engine refused the read's memory "
                                f"({errno.errorcode.get(-rc, rc)})")

    def _forget(self, pending):
        """pending waited for: its file may be closed."""
        with self._lock:
            if pending in self._pending:
                self._pending.discard(pending)
                entry = self._files.get(pending.key)
                if entry is not None:
                    entry[1] -= 1
                    if not entry[1]:
                        self._closable[pending.key] = None

    def close(self):
        """Refuses new reads, waits for every read still out, closes the
        files, returns the lease. A read another thread is waiting for is
        waited out too: its wait still uses the file and the engine, which
        closing under it made that thread crash; so is a read another
        thread is allocating for (placed after a wait here, it would name a
        request freed). A read whose thread an interrupt stopped is
        finished here: nothing is waited for that no thread will end."""
        with self._lock:
            self._closing = True
            pending = list(self._pending)
        for p in pending:
            try:
                p.wait()
            except GdunlockError:
                pass
        with self._lock:
            for f, _ in self._files.values():
                self._lib.gdu_io_close(f)
            self._files, self._closable = {}, {}
            if self._engine:
                self._lib.gdu_st_engine_return(self._engine)
            self._engine = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _normalize(index, ndim):
    """index -> one entry per dimension (an int or a slice), with None
    (a new axis) kept where it stands, as torch 2.13 indexes
    (applySlicing, aten/src/ATen/TensorIndexing.h): the entries are taken
    in order with a position among the result's dimensions; an Ellipsis
    moves it on by the dimensions no entry names, so that a second
    Ellipsis moves it past them (fine at the end of the index, and when
    every dimension is named; anything after it is then out of range). A
    slice step <= 0 raises SliceStepError where torch's order meets it.
    Raises TypeError for advanced indexing (lists, tensors, masks)."""
    if isinstance(index, slice):  # torch slices a lone one before counting dimensions
        _check_slice(index)
    if not isinstance(index, tuple):
        index = (index,)
    # Anything but Python's and numpy's integers, slices, None and Ellipsis
    # is torch's own indexing, read whole: a bool is a scalar mask, and so
    # is a 0-d uint8 tensor or array, which has __index__ all the same.
    if not all(i is None or i is Ellipsis or isinstance(i, slice) or
               (isinstance(i, numbers.Integral) and not isinstance(i, bool)) for i in index):
        raise TypeError("advanced index")
    real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if real > ndim:
        raise SliceError(f"too many indices for a tensor of {ndim} dimensions: {real}")
    spare = ndim - real
    entries = [slice(None)] * ndim
    result = list(range(ndim))  # the result's dimensions: a dimension of the tensor, or None
    at = 0  # the position in result the next entry applies to
    for i in index:
        if i is Ellipsis:
            at += spare
            continue
        if i is None:
            if at > len(result):
                raise SliceError(f"a new axis at dimension {at} of a result of {len(result)}")
            result.insert(at, None)
            at += 1
            continue
        if isinstance(i, slice):
            _check_slice(i)
        else:
            i = int(i)
        if at >= len(result):
            # torch reads the size there from past the end of its sizes: a
            # whole slice (start 0, no stop, step 1) takes all of it whatever
            # it reads; any other entry is out of range (or, with a stop,
            # compared with whatever lies there)
            if isinstance(i, slice) and i.start in (None, 0) and i.stop is None and \
                    i.step in (None, 1):
                at += 1
                continue
            raise SliceError(f"dimension {at} is out of range: the result has {len(result)} "
                             f"(an Ellipsis after the first moves past the dimensions it spans)")
        # entries land on the tensor's dimensions only: new axes stay behind
        entries[result[at]] = i
        if isinstance(i, slice):
            at += 1
        else:
            del result[at]
    # every dimension in order, each new axis before the dimension after it
    seq, d = [], 0
    for kept in result:
        if kept is None:
            seq.append(None)
        else:
            seq += entries[d:kept + 1]
            d = kept + 1
    return seq + entries[d:]


def _check_slice(item):
    """Raises TypeError for slice bounds that are not integers (read whole:
    torch's TypeError), SliceStepError for a step <= 0, in torch's words."""
    if not all(p is None or hasattr(p, "__index__") for p in (item.start, item.stop, item.step)):
        raise TypeError("slice bounds must be integers")
    step = item.step
    if step is None or isinstance(step, bool):
        return
    try:
        step = step.__index__()
    except TypeError:  # a float tensor: torch's own error
        raise TypeError("slice bounds must be integers") from None
    if step == 0:
        raise SliceStepError("slice step cannot be zero")
    if step < 0:
        raise SliceStepError("step must be greater than zero")


def plan_slice(shape, bits, index):
    """The reads a basic index of a tensor needs.

    shape: the tensor's dimensions; bits: bits per element (a multiple of 8);
    index: what tensor[index] takes (ints, slices with a positive step,
    Ellipsis, None). Returns (runs, box_shape, post): runs are (byte offset
    within the tensor, length) of the smallest box of elements holding the
    result, in row-major order, box_shape that box's dimensions, and post the
    index that turns the box (viewed as box_shape) into the result. Raises
    SliceError for an index out of range and TypeError for advanced
    indexing (lists, tensors, masks), which the callers read whole."""
    ndim = len(shape)
    lo, hi, post = [], [], []
    for item in _normalize(index, ndim):
        if item is None:
            post.append(None)
            continue
        d = len(lo)
        n = shape[d]
        if isinstance(item, int):
            i = item + n if item < 0 else item
            if not 0 <= i < n:
                raise SliceError(f"index {item} is out of bounds for dimension {d} with size {n}")
            lo.append(i)
            hi.append(i + 1)
            post.append(0)
            continue
        for part in (item.start, item.stop, item.step):
            if part is not None and not (hasattr(part, "__index__") and not isinstance(part, bool)):
                raise TypeError("slice bounds must be integers")
        start, stop, step = slice(*(None if p is None else p.__index__()
                                    for p in (item.start, item.stop, item.step))).indices(n)
        count = len(range(start, stop, step))
        if count == 0:
            lo.append(min(start, n))
            hi.append(min(start, n))
            post.append(slice(0, 0))
        else:
            lo.append(start)
            hi.append(start + (count - 1) * step + 1)
            post.append(slice(0, hi[-1] - lo[-1], step))
    box = [h - l for l, h in zip(lo, hi)]
    esize = bits // 8
    if any(b == 0 for b in box):
        return Runs(0, [(0, 0)], 0), box, tuple(post)
    # The trailing dimensions the box covers whole are contiguous with the
    # last partial one: each run spans them.
    k = ndim - 1
    while k >= 0 and lo[k] == 0 and hi[k] == shape[k]:
        k -= 1
    if k < 0:
        return Runs(0, [], math.prod(shape) * esize), box, tuple(post)
    strides = [math.prod(shape[d + 1:]) * esize for d in range(ndim)]
    base = sum(lo[d] * strides[d] for d in range(k + 1))
    return Runs(base, [(box[d], strides[d]) for d in range(k)], box[k] * strides[k]), box, \
        tuple(post)


class Runs:
    """The byte runs of a box of a tensor, without a list of them: `length`
    bytes at base + sum(i_d * stride_d) for every i_d < count_d of the
    outer dimensions dims [(count, stride)], in row-major order. A column of
    a [32000, 4096] tensor is 32000 runs: extents() has the library build
    the engine's array of them. It also reads as a list of (offset, length)
    pairs."""

    def __init__(self, base, dims, length):
        self.base, self.dims, self.length = base, dims, length
        self.count = math.prod(c for c, _ in dims) if length else 0
        self.nbytes = self.count * length
        self._box = None

    def offsets(self, at=0):
        """The runs' offsets plus at, an array('Q'), in order."""
        out = array.array("Q")
        if not self.count:
            return out
        starts = [self.base + at]
        for count, stride in self.dims[:-1]:
            starts = [o + i * stride for o in starts for i in range(count)]
        if not self.dims:
            out.extend(starts)
            return out
        count, stride = self.dims[-1]
        for o in starts:
            out.extend(range(o, o + count * stride, stride))
        return out

    def box(self):
        """The box the engine reads these runs as (gdu_io_submit_box): its
        outer counts and strides (ctypes arrays, or None), their number and
        the run length; no runs is one run of 0 bytes. Made once: a plan's
        runs serve every request of that plan."""
        if self._box is None:
            nd = len(self.dims) if self.count else 0
            counts = (ctypes.c_uint64 * nd)(*[c for c, _ in self.dims]) if nd else None
            strides = (ctypes.c_uint64 * nd)(*[s for _, s in self.dims]) if nd else None
            self._box = (counts, strides, nd, self.length if self.count else 0)
        return self._box

    def __len__(self):
        return self.count

    def __iter__(self):
        return ((o, self.length) for o in self.offsets())

    def __eq__(self, other):
        if isinstance(other, Runs):
            return (self.base, self.dims, self.length, self.count) == \
                (other.base, other.dims, other.length, other.count) or \
                (self.count == other.count == 0)
        return list(self) == list(other)

    __hash__ = None


def plan_read(shape, bits, index):
    """plan_slice for any dtype. A sub-byte dtype (F4, F6_*) is planned in
    bytes: its rows must end on a byte, and an index may cut its last
    dimension only at element boundaries that are byte boundaries (a slice
    with step 1); the box is then in bytes. Raises SliceError naming the
    element where a byte cannot be cut, TypeError for advanced indexing."""
    if bits % 8 == 0:
        return plan_slice(shape, bits, index)
    shape = list(shape)
    if not shape or shape[-1] * bits % 8:
        raise SliceError(f"a {bits}-bit tensor of shape {shape} cannot be sliced: its rows do "
                         f"not end on a byte; read it whole (get_tensor)")
    items = _normalize(index, len(shape))
    real = [i for i, item in enumerate(items) if item is not None]
    last = items[real[-1]]
    n = shape[-1]
    if isinstance(last, int) or (last.step is not None and last.step.__index__() != 1):
        raise SliceError(f"a {bits}-bit tensor's last dimension can be sliced only in byte-sized "
                         f"runs (a slice with step 1), not with {last!r}")
    start, stop, _ = slice(*(None if p is None else p.__index__()
                             for p in (last.start, last.stop, None))).indices(n)
    stop = max(start, stop)
    if start * bits % 8 or stop * bits % 8:
        raise SliceError(f"elements {start}..{stop} of a {bits}-bit dimension do not start and "
                         f"end on a byte")
    items[real[-1]] = slice(start * bits // 8, stop * bits // 8)
    return plan_slice(shape[:-1] + [n * bits // 8], 8, tuple(items))
