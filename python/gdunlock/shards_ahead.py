"""The shards of a checkpoint opened ahead of the caller (ShardsAhead): the
next shard (model-00002-of-00003 after -00001-) is opened and its first
reads queued once the walk of this one has queued its last, because
serving engines and transformers open the shards in turn, and without it
the engine idles while each is opened and its first tensor comes in
(bench/results/2026-12-04-h200-engine-trace.md). What is opened so waits
to be claimed by the caller's own open of that file, and is given back
when nobody claims it in time. One registry, `registry`, for the
process."""
import _thread
import os
import re
import struct
import threading
import time

# Bytes read ahead of the next shard at most.
NEXT_FILE_AHEAD = 256 << 20
# A shard whose header is larger is not opened ahead: a caller that never
# opens it would pay for parsing it, which grows with the header, inside a
# request of this file (docs/load-api.md has what it cost). The usual
# shards, of hundreds of tensors, have headers far smaller.
NEXT_FILE_HEADER_MAX = 256 << 10
_SHARD = re.compile(r"(.*-)(\d+)(-of-)(\d+)(\.safetensors)")


def next_shard(path):
    """The shard after path (-00002-of-00003 after -00001-of-00003), or
    None when path is not a numbered shard, is the last, or the next one is
    missing."""
    folder, name = os.path.split(path)
    m = _SHARD.fullmatch(name)
    if m is None or int(m[2]) >= int(m[4]):
        return None
    nxt = os.path.join(folder, f"{m[1]}{int(m[2]) + 1:0{len(m[2])}d}{m[3]}{m[4]}{m[5]}")
    return nxt if os.path.isfile(nxt) else None


def header_bytes(path):
    """The header length a .safetensors file at path declares (its first 8
    bytes); opened without waiting (a FIFO put there has no writer)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        return struct.unpack("<Q", os.pread(fd, 8, 0))[0]
    finally:
        os.close(fd)


def file_identity(st):
    """What says a file (its os.stat result) is still the file it was: a
    rewrite in place can put the modification time back (cp -p, rsync
    --inplace -t), never the change time."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def stat_key(path):
    """path's file_identity."""
    return file_identity(os.stat(path))


class ShardsAhead:
    """The files opened ahead, each waiting to be claimed (real path ->
    (the open file, its stat, when it is given back unless claimed:
    time.monotonic())), and the files the caller holds open (real path ->
    how many opens), which are not opened ahead again. An open file here is
    anything with close().

    One thread gives back what nobody claimed in time, started by the
    first file kept in a process (a child of fork() has none of its
    parent's): a timer thread for every shard cost the caller's thread its
    start and cancel. It is started without threading.Thread.start(), which
    waits until the new thread has run, inside the caller's request."""

    def __init__(self):
        self.wait_s = 5.0  # how long a file opened ahead waits to be claimed
        self.made = {}
        self._held = {}
        self._lock = threading.Condition()
        self._giver = None  # the pid of the process whose giver thread runs
        os.register_at_fork(after_in_child=self._forget_in_child)

    def _forget_in_child(self):
        """In a child of fork(): a lock the parent's threads held is made
        anew, and what the parent opened ahead is forgotten."""
        self._lock = threading.Condition()
        self.made.clear()

    def held(self, path):
        """The caller opened real path (once more)."""
        with self._lock:
            self._held[path] = self._held.get(path, 0) + 1

    def let_go(self, path):
        """The caller closed an open of real path."""
        with self._lock:
            self._held[path] -= 1
            if not self._held[path]:
                del self._held[path]

    def wanted(self, path):
        """Whether real path may be opened ahead: none waits for it, and
        the caller does not hold it open."""
        with self._lock:
            return path not in self.made and path not in self._held

    def open_after(self, name, lenient, open_ahead):
        """The shard after name (the path a numbered shard was opened by),
        unless the caller holds it open or one waits for it already, opened
        by open_ahead(its path) (None when it cannot be) and kept to be
        claimed. Quietly nothing when there is none, or when its header is
        too large to open on a guess (NEXT_FILE_HEADER_MAX)."""
        path = next_shard(name)
        if path is None:
            return
        key = os.path.realpath(path)
        if not self.wanted(key):
            return
        try:
            if header_bytes(key) > NEXT_FILE_HEADER_MAX:
                return
            stat = stat_key(key)
        except Exception:  # noqa: BLE001  (the caller's own open reports it)
            return
        made = open_ahead(path)
        if made is not None and not self.keep(key, made, stat, lenient):
            made.close()

    def claim(self, path, lenient):
        """The file opened ahead of path, if it is still the file read and
        was opened as lenient as asked; every other one opened ahead is
        given back (the walk went elsewhere)."""
        # most opens find none: no path resolved, no stat (read without the
        # lock: one registered meanwhile waits for the next open or its time)
        if not self.made:
            return None
        try:
            key = os.path.realpath(path)
            stat = stat_key(key)
        except (OSError, TypeError, ValueError):
            key = stat = None
        with self._lock:
            made = self.made.pop(key, None) if key is not None else None
            others = list(self.made.values())
            self.made.clear()
        for other, _, _ in others:
            other.close()
        if made is None:
            return None
        if made[1] != (stat, lenient):
            made[0].close()
            return None
        return made[0]

    def keep(self, key, made, stat, lenient):
        """made (an open of real path key, whose file had stat, lenient or
        not) waits to be claimed, for wait_s seconds; False when one waits
        for key already."""
        at = time.monotonic() + self.wait_s
        with self._lock:
            if key in self.made:
                return False
            soonest = self._soonest()
            self.made[key] = (made, (stat, lenient), at)
            if self._giver != os.getpid():  # the first, or the first since a fork
                _thread.start_new_thread(self._give_back_unclaimed, ())
                self._giver = os.getpid()
            elif soonest is None or at < soonest:
                self._lock.notify()
        return True

    def give_back_all(self):
        """Closes every file waiting to be claimed."""
        with self._lock:
            made = list(self.made.values())
            self.made.clear()
        for f, _, _ in made:
            f.close()

    def _soonest(self):
        """Under the lock: when the first file opened ahead is given back
        unless claimed (time.monotonic()), None when none waits."""
        return min((when for _, _, when in self.made.values()), default=None)

    def _give_back_unclaimed(self):
        """The giver's loop: closes each file opened ahead that nobody
        claimed by its time."""
        while True:
            with self._lock:
                while True:
                    now = time.monotonic()
                    due = [k for k, (_, _, when) in self.made.items() if when <= now]
                    if due:
                        break
                    soonest = self._soonest()
                    self._lock.wait(None if soonest is None else soonest - now)
                unclaimed = [self.made.pop(k)[0] for k in due]
            for made in unclaimed:
                made.close()


registry = ShardsAhead()
