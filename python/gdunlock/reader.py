"""Reading byte ranges of checkpoint files through the process's kept I/O
engines (a lease each, given back on close). No torch here: memory is an
address. The byte ranges an index of a tensor needs are slicing.py's."""
import _thread
import ctypes
import errno
import os
import threading
import weakref

from ._lib import IO_OP_READ, GdunlockError, IoExtent, StError, TARGET_HOST, check, lib


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
        whose extents the engine makes, rather than building a column's
        4,096 of them here on every request (issue 21). The engine reads into
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
