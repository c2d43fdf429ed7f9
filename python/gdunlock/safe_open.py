"""safe_open: the interface of safetensors.safe_open (keys, metadata,
get_tensor, get_tensors, get_slice, a context manager) over gdunlock's
engine, with safetensors' exception types (errors.py). On a GPU each
tensor comes back in its own allocation; the bytes move through the
process's kept I/O engine straight into that memory. On the CPU tensors
are views of the file's mapping, as safetensors' are (host_map.py), unless
backend="pread" asks for the engine's reads into memory of their own;
what follows is about the engine's reads.

Loading every key one by one runs at the whole-file speed: while the caller
asks for the keys in order (sorted, as keys() lists them, by offset, or in
natural order: layers.2 before layers.10), the reads of the next tensors are
already queued (a read-ahead window that doubles with every hit, up to
`readahead` bytes, and resets on a jump). Slices are read ahead too: the
next tensor of a family (the name with its numbers taken out: every
layer's q_proj) gets the index the family's last one got, when its shape is
the same; a file's first cut that looks like one rank's part of a
tensor-parallel split predicts the next tensors' parts (a few times its own
bytes, until the next request confirms it). A caller that asks each tensor
for several indices in a row (every rank's slice of it, in one process)
gets the next tensors read ahead with all of them. A slice reads only the
byte ranges it needs. A caller that opens a checkpoint's numbered shards in
turn finds the next one's first tensors on their way when it opens it."""
import _thread
import numbers
import os
import re
import struct
import threading
import time
import weakref

from ._lib import TARGET_GPU, TARGET_HOST, GdunlockError
from .checkpoint import Checkpoint, parse_device
from .errors import InvalidDeviceError, SafetensorError, as_safetensors_error
from .host_map import HostMap
from .reader import RangeReader
from .slicing import Runs, SliceError, normalize, plan_read

_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8,
         "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16,
         "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64,
         "I64": 64, "U64": 64}
_FRAMEWORKS = ("pt", "torch", "pytorch")
_NUMPY = ("np", "numpy")
# frameworks safetensors serves and gdunlock does not
_THEIRS_ONLY = ("tf", "tensorflow", "jax", "flax", "mlx", "paddle")
_BACKENDS = ("mmap", "pread")
_FIRST_WINDOW = 64 << 20
DEFAULT_READAHEAD = 1 << 30
# the numbers of a name: taken out for its family, compared as numbers when
# names are sorted (split keeps them: the group)
_DIGITS = re.compile(r"(\d+)")
_SKIP = 8  # keys a request may skip and still continue the walk
_SCAN = 256  # keys a request looks at for reading ahead
_splits_seen = {}  # "last": the split of the last request of any file that had one
_families_of = {}  # tensor name -> its family (the name with its numbers taken out)
_NO_PATTERN = (None, ())
# indices a family remembers of its last tensor: a tensor read row by row
# (32,000 indices) would otherwise cost every request a walk over all of them
_PATTERN_MAX = 64
# The next shard of a checkpoint (model-00002-of-00003 after -00001-) is
# opened and its first reads queued once the walk of this one has queued
# its last: serving engines and transformers open the shards in turn, and
# without it the engine idles while each is opened and its first tensor
# comes in (on the H200 an open took 0.5-0.9 ms and the first read after it
# 1.3-1.8 ms, where a rank's eighth of a 2 GB shard takes about 8 ms). Bytes
# read ahead so, and seconds they wait to be claimed by safe_open of that
# file before they are given back.
_NEXT_FILE_AHEAD = 256 << 20
_NEXT_FILE_WAIT = 5.0
# A shard whose header is larger is not opened ahead: a caller that never
# opens it would pay for parsing it, which grows with the header, inside a
# request of this file (docs/load-api.md has what it cost). The usual
# shards, of hundreds of tensors, have headers far smaller.
_NEXT_FILE_HEADER_MAX = 256 << 10
_SHARD = re.compile(r"(.*-)(\d+)(-of-)(\d+)(\.safetensors)")
# real path -> (safe_open made ahead, its stat, when it is given back unless
# claimed: time.monotonic())
_made_ahead = {}
_open_paths = {}  # real path -> safe_opens of it the caller holds
_ahead_lock = threading.Condition()
# The one thread that gives back what nobody claimed in time: the process
# that started it (a child of fork() has none). A timer thread for every
# shard cost the caller's thread 70-125 us to start and cancel on the
# development machine, and each woke to end beside it. It is started
# without threading.Thread.start(), which waits until the new thread has
# run: in a first rank's walk on the development machine (2 CPUs) that wait
# took 0.2-5.6 ms; on the H200 none showed.
_giver_of = [None]
# torch's caching allocator asks the driver for every block it lacks, and
# on the H200 each ask cost about 0.1 ms whether 2 MiB or 1.5 GiB; it gives
# a tensor of up to 10 MiB a block of 20 MiB and a larger one a block of its
# own. A rank's 138 slices allocated one by one took 3.6-4.0 ms in a fresh
# process, 0.9-1.4 ms when one block of their total was allocated and
# freed first, that block included
# (bench/results/2026-12-02-h200-alloc-and-blocking-sync.md).
# Batches of reads smaller than this are left to the allocator.
_RESERVE_MIN = 32 << 20
# torch serves tensors of up to 1 MiB from a pool of 2 MiB blocks of their
# own, and rounds every larger one up to 512 bytes within a block
# (kSmallSize and kMinBlockSize, c10/core/AllocatorConfig.h).
_SMALL_TENSOR = 1 << 20
_BLOCK_ROUND = 512
# Whole tensors of up to GROUP_TENSOR bytes of one file read ahead together
# share one request, up to GROUP_READS of them (submit_group).
GROUP_TENSOR = 64 << 10
GROUP_READS = 256


# Every safe_open alive, those made ahead included. In a child of fork()
# they are the parent's: a thread of the parent inside one of their calls
# held its lock, held for ever in the child (which has only the forking
# thread), and their reads would go to the parent's engine, which has no
# workers there. The child makes their locks anew and has their reads fail
# naming the fork; what the parent made ahead is forgotten.
_alive = weakref.WeakSet()


def _parents_in_child():
    global _ahead_lock
    _ahead_lock = threading.Condition()
    for f in list(_alive):
        if "_lock" in f.__dict__:  # (not one whose state another took over)
            f._lock, f._forked = threading.Lock(), True
    _made_ahead.clear()


os.register_at_fork(after_in_child=_parents_in_child)


def _next_shard(path):
    """The shard after path (-00002-of-00003 after -00001-of-00003), or
    None when path is not a numbered shard, is the last, or the next one is
    missing."""
    folder, name = os.path.split(path)
    m = _SHARD.fullmatch(name)
    if m is None or int(m[2]) >= int(m[4]):
        return None
    nxt = os.path.join(folder, f"{m[1]}{int(m[2]) + 1:0{len(m[2])}d}{m[3]}{m[4]}{m[5]}")
    return nxt if os.path.isfile(nxt) else None


def _header_bytes(path):
    """The header length a .safetensors file at path declares (its first 8
    bytes); opened without waiting (a FIFO put there has no writer)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        return struct.unpack("<Q", os.pread(fd, 8, 0))[0]
    finally:
        os.close(fd)


def _stat_key(path):
    """What says path is still the file it was: a rewrite in place can put
    the modification time back (cp -p, rsync --inplace -t), never the
    change time."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _claim_made_ahead(path, lenient):
    """The safe_open made ahead of path, if its file is still the one
    read; every other one made ahead is given back (the walk went
    elsewhere)."""
    # most opens find none: no path resolved, no stat (read without the
    # lock: one registered meanwhile waits for the next open or its time)
    if not _made_ahead:
        return None
    try:
        key = os.path.realpath(path)
        stat = _stat_key(key)
    except (OSError, TypeError, ValueError):
        key = stat = None
    with _ahead_lock:
        made = _made_ahead.pop(key, None) if key is not None else None
        others = list(_made_ahead.values())
        _made_ahead.clear()
    for other, _, _ in others:
        other.close()
    if made is None:
        return None
    if made[1] != stat or made[0]._lenient != lenient:
        made[0].close()
        return None
    return made[0]


def _keep_made_ahead(key, made, stat):
    """made (a safe_open of real path key, whose file had stat) waits to be
    claimed, for _NEXT_FILE_WAIT seconds; False when one waits for key
    already."""
    at = time.monotonic() + _NEXT_FILE_WAIT
    with _ahead_lock:
        if key in _made_ahead:
            return False
        soonest = _soonest()
        _made_ahead[key] = (made, stat, at)
        if _giver_of[0] != os.getpid():  # the first, or the first since a fork
            _thread.start_new_thread(_give_back_unclaimed, ())
            _giver_of[0] = os.getpid()
        elif soonest is None or at < soonest:
            _ahead_lock.notify()
    return True


def _soonest():
    """Under _ahead_lock: when the first safe_open made ahead is given back
    unless claimed (time.monotonic()), None when none waits."""
    return min((when for _, _, when in _made_ahead.values()), default=None)


def _give_back_unclaimed():
    """The giver's loop: closes each safe_open made ahead that nobody
    claimed by its time."""
    while True:
        with _ahead_lock:
            while True:
                now = time.monotonic()
                due = [k for k, (_, _, when) in _made_ahead.items() if when <= now]
                if due:
                    break
                soonest = _soonest()
                _ahead_lock.wait(None if soonest is None else soonest - now)
            unclaimed = [_made_ahead.pop(k)[0] for k in due]
        for made in unclaimed:
            made.close()


def _family(name):
    """name with its numbers taken out, worked out once a name: the walk asks
    it of every key it looks at."""
    family = _families_of.get(name)
    if family is None:
        if len(_families_of) >= 1 << 16:
            _families_of.clear()
        family = _families_of[name] = _DIGITS.sub("#", name)
    return family


def _torch():
    try:
        import torch
    except ImportError:
        raise GdunlockError("GDU_ST_ERR_NO_TORCH", "tensors need torch, which is not "
                            "installed") from None
    return torch


def _torch_if_installed():
    """torch, or None where it is not installed (numpy arrays need none)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _allocator_splits(torch):
    """Whether torch's CUDA allocator serves small tensors out of a larger
    cached block: its native allocator does unless max_split_size_mb keeps
    large blocks whole; expandable segments map memory by the byte (nothing
    to save), and cudaMallocAsync has no such cache."""
    try:
        if torch.cuda.get_allocator_backend() != "native":
            return False
    except (AttributeError, RuntimeError):
        return False
    conf = ",".join(os.environ.get(k, "") for k in ("PYTORCH_CUDA_ALLOC_CONF",
                                                    "PYTORCH_ALLOC_CONF"))
    conf = conf.replace(" ", "").lower()
    return "max_split_size_mb" not in conf and "expandable_segments:true" not in conf


class Target:
    """Where tensors go: host memory or one GPU; allocates there."""

    def __init__(self, device):
        if hasattr(device, "type") and hasattr(device, "index") and device.type == "cuda" \
                and device.index is None:
            device = "cuda"
        target, gpus = parse_device(device)
        if len(gpus) != 1:
            raise ValueError(f"one device, not {device!r}")
        self.torch = _torch() if target == TARGET_GPU else _torch_if_installed()
        self.target = target
        self.ordinal = gpus[0]
        self.device = "cpu" if self.torch is None else self.torch.device("cpu") \
            if target == TARGET_HOST else self.torch.device("cuda", self.ordinal)
        self._reserving = target == TARGET_GPU and _allocator_splits(self.torch)
        self._streams = None  # (read the current stream's id, the default stream, its id)

    def reader(self):
        return RangeReader(self.target, self.ordinal)

    def reserve(self, sizes):
        """Before allocations of sizes (bytes each) in a row on a GPU: one
        block that holds those torch takes out of its large blocks,
        allocated and freed, which torch's caching allocator keeps and splits
        for them (_RESERVE_MIN). Nothing for host memory, a smaller batch, an
        allocator that would not split the block, or when the GPU has less
        than twice the block free (torch would empty its cache to make room,
        and the reads' own allocations report a shortage)."""
        if not self._reserving:
            return
        nbytes = sum(-(-n // _BLOCK_ROUND) * _BLOCK_ROUND for n in sizes if n > _SMALL_TENSOR)
        if nbytes < _RESERVE_MIN:
            return
        try:
            free, _ = self.torch.cuda.mem_get_info(self.device)
            if 2 * nbytes <= free:
                self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
        except RuntimeError:  # a shortage after all: the allocations will say
            pass

    def empty(self, nbytes, dtype=None, shape=None):
        """nbytes of memory on the device: a tensor of torch dtype and shape
        (nbytes theirs) when dtype is given, else 1-D uint8. The engine copies on
        its own streams, which wait for the legacy default stream's work but
        not for other streams': a caller on a side stream is synchronized
        first, so that memory its kernels were still using is not written."""
        try:
            buf = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device) \
                if dtype is None else self.torch.empty(shape, dtype=dtype, device=self.device)
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError, a bad device
            code = "GDU_ST_ERR_DEVICE_MEMORY" if "out of memory" in str(e).lower() else \
                "GDU_ST_ERR_NO_CUDA"
            raise GdunlockError(code, f"{nbytes} bytes on {self.device}: "
                                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        if self.target == TARGET_GPU and self._on_side_stream():
            self.torch.cuda.current_stream(self.device).synchronize()
        return buf

    def _on_side_stream(self):
        """Whether the caller's current stream on the GPU is not its default
        one. Read by id, as torch.cuda.current_stream() reads it, without
        the Stream object it makes: every result is allocated here, and the
        object cost more than the allocation's own Python."""
        if self._streams is None:  # the device's default stream, the same for the process
            default = self.torch.cuda.default_stream(self.device)
            self._streams = (getattr(self.torch._C, "_cuda_getCurrentStream", None), default,
                             default.stream_id)
        current_id, default, default_id = self._streams
        if current_id is None:  # a torch without it
            return self.torch.cuda.current_stream(self.device) != default
        return current_id(self.ordinal)[0] != default_id


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


def _canonical(index):
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


def _index_key(index):
    """index as a dict key (slices are unhashable before Python 3.12), or
    None for an index that is not worth keeping (_canonical)."""
    items = _canonical(index)
    if items is None:
        return None
    return tuple(("s", i.start, i.stop, i.step) if isinstance(i, slice) else i for i in items)


def _same_index(a, b):
    """Whether indices a and b are the same (a slice and a tuple of it
    are); None is the whole tensor, the same as no index but None."""
    if a is None or b is None:
        return a is b
    key = _index_key(a)
    return key is not None and key == _index_key(b)


_plans = {}  # (shape, dtype, index key or whole tensor bytes) -> Plan: every layer asks alike
# family -> (shape, indices) last asked through any safe_open of the process
# (_follow): the next shard of a checkpoint is walked as the last one was.
_families_seen = {}


_splits_of = {}  # (shape, index key) -> _split_of: asked of every key a walk predicts


def _split_of(shape, index):
    """(ndim, dim, world, rank) when index is one rank's part of one
    dimension, as tensor parallelism cuts it (ceil(n / world) elements a
    rank, the last rank's part short), every other dimension whole; else
    None."""
    key = _index_key(index)
    if key is None:
        return _find_split(shape, index)
    key = (tuple(shape), key)
    if key not in _splits_of:
        if len(_splits_of) >= 4096:
            _splits_of.clear()
        _splits_of[key] = _find_split(shape, index)
    return _splits_of[key]


def _find_split(shape, index):
    try:
        items = normalize(index, len(shape))
    except (TypeError, SliceError):
        return None
    if not all(isinstance(s, slice) for s in items):  # an int or a new axis
        return None
    part = None
    for d, s in enumerate(items):
        start, stop, step = s.indices(shape[d])
        if step != 1:
            return None
        if (start, stop) != (0, shape[d]):
            if part is not None:
                return None
            part = (d, start, stop)
    if part is None:
        return None
    d, start, stop = part
    n = shape[d]
    for world in range(2, 257):
        size = -(-n // world)
        if start < n and start % size == 0 and stop == min(start + size, n):
            return len(shape), d, world, start // size
    return None


def _split_index(shape, split):
    """The index of split's rank in a tensor of shape, or None when shape
    has another number of dimensions or the rank gets nothing of it."""
    ndim, d, world, rank = split
    if len(shape) != ndim:
        return None
    size = -(-shape[d] // world)
    start = rank * size
    if start >= shape[d]:
        return None
    return (slice(None),) * d + (slice(start, min(start + size, shape[d])),)


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
            if len(_plans) >= 4096:
                _plans.clear()
            plan = _plans[key] = Plan(Runs(0, [], info.nbytes), list(info.shape), None)
        return plan
    key = _index_key(index)
    key = key and (info.shape, info.dtype, key)
    plan = _plans.get(key) if key else None
    if plan is None:
        try:
            runs, box, post = plan_read(list(info.shape), _BITS[info.dtype], index)
        except TypeError:
            return None
        if _BITS[info.dtype] % 8 == 0 and _takes_the_box(box, post):
            post = None  # the box is the result: no view of it made per request
        plan = Plan(runs, box, post)
        if key:
            if len(_plans) >= 4096:
                _plans.clear()
            _plans[key] = plan
    return plan


_box_dtypes = {}  # safetensors dtype -> the torch dtype its boxes are allocated in, or None


def _box_dtype(name):
    """The torch dtype a box of tensor dtype name is allocated in, so that
    the result needs no view made per request; None where the bytes come
    back raw or are planned in bytes (sub-byte dtypes, dtypes this torch
    lacks)."""
    try:
        return _box_dtypes[name]
    except KeyError:
        from .torch_bridge import torch_dtype
        dtype = _box_dtypes[name] = torch_dtype(name) if _BITS[name] % 8 == 0 else None
        return dtype


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

        bits = _BITS[self.info.dtype]
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
        stand_in = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}[bits // 8]
        torch = _torch()
        part = self.buf.view(getattr(torch, stand_in)).reshape(box)[post]
        return part.contiguous().reshape(-1).view(torch.uint8)  # a strided part: its bytes


def queue_plan(reader, source, info, plan):
    """The reads of plan (of tensor info, in the file source, a FileRef)
    queued on reader, their memory to come (place_plan)."""
    return reader.submit_runs_deferred(source, plan.runs, info.file_offset)


def place_plan(pending, target, info, plan):
    """The memory of a queued read (queue_plan) allocated on target and
    given to it; returns the Read. A failed allocation cancels the read
    before the error goes up."""
    dtype = _box_dtype(info.dtype)

    def allocate():
        buf = target.empty(plan.nbytes, dtype, plan.box)
        return buf.data_ptr(), buf
    return Read(pending, pending.fill(allocate), info, plan, dtype is not None)


def submit_plan(reader, target, source, info, plan):
    """Queues the reads of plan into fresh memory of target; returns the
    Read. The reads are queued first and the memory allocated while the
    engine reads: a process's first tensors each waited 0.4-1.1 ms for a
    fresh block of torch's from the driver with the engine idle on the H200
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
        buf = target.empty(plan.nbytes, _box_dtype(info.dtype), plan.box)
        bufs.append(buf)
        runs.append((info.file_offset + plan.runs.base, plan.nbytes, buf.data_ptr()))
    shared = _SharedWait(reader.submit(source, runs, bufs))
    return [Read(shared, buf, info, plan, _box_dtype(info.dtype) is not None)
            for (info, plan), buf in zip(members, bufs)]


class _SharedWait:
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


def _settle(reads):
    """Waits for reads nobody will take (read ahead, then not asked for)."""
    for read in reads:
        try:
            read.pending.wait()
        except GdunlockError:
            pass


# sorted names -> their _NameOrders: the ranks of a tensor-parallel load
# open each shard once each
_orders_of_names = {}
_ORDERS_KEPT = 64


class _NameOrders:
    """A file's names sorted, with {name: position}, and the same in natural
    order, worked out the first time a walk needs it: a walk in key order
    never looks at it (_in_step), and sorting a shard's 46 names in natural
    order took 0.17-0.24 ms on the development machine, three times in the
    first rank of a 3-shard checkpoint (on the H200 the first rank moved by
    less than its spread: bench/results/2026-12-03-h200-first-rank-python.md).
    Shared by the opens of files with the same names (not to be changed)."""

    def __init__(self, keys):
        self.keys, self.at_key = keys, {k: i for i, k in enumerate(keys)}
        self._natural = None

    def natural(self):
        """(the names in natural order, {name: position} in it)."""
        if self._natural is None:  # two opens may both make it: the same
            natural = sorted(self.keys, key=natural_key)
            self._natural = natural, {k: i for i, k in enumerate(natural)}
        return self._natural


def _name_orders(names):
    """The _NameOrders of names."""
    keys = sorted(names)
    key = tuple(keys)
    orders = _orders_of_names.get(key)
    if orders is None:
        orders = _NameOrders(keys)
        if len(_orders_of_names) >= _ORDERS_KEPT:
            _orders_of_names.clear()
        _orders_of_names[key] = orders
    return orders


def natural_key(name):
    """layers.2 before layers.10: numbers compare as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(name)]


def _check_call(framework, device, backend):
    """safe_open's framework, device and backend checked as safetensors
    checks them (SafetensorError naming the one that is wrong); returns
    whether arrays are numpy's, the device (None: the CPU) and the backend
    (None: safe_open.default_backend)."""
    if framework in _THEIRS_ONLY:
        raise SafetensorError("GDU_ST_ERR_FRAMEWORK", f"framework {framework}: gdunlock returns "
                              f"torch tensors ('pt') or numpy arrays ('np'); "
                              f"safetensors.safe_open serves {framework}")
    if framework not in _FRAMEWORKS + _NUMPY:
        raise SafetensorError("GDU_ST_ERR_FRAMEWORK", f"framework {framework} is invalid")
    if backend is not None and backend not in _BACKENDS:
        raise SafetensorError("GDU_ST_ERR_INVALID_ARGUMENT", f"backend {backend!r} is invalid "
                              f"(expected one of: \"mmap\", \"pread\")")
    device = "cpu" if device is None else device
    try:
        host = parse_device(device)[0] == TARGET_HOST
    except ValueError as e:
        raise InvalidDeviceError("GDU_ST_ERR_INVALID_ARGUMENT", f"device {device} is invalid: "
                                 f"{e}") from None
    numpy = framework in _NUMPY
    if not numpy:
        _torch()  # GDU_ST_ERR_NO_TORCH before the open, as before
    if numpy and not host:
        raise SafetensorError("GDU_ST_ERR_FRAMEWORK", f"Device {device} is not supported for "
                              f"framework numpy (numpy arrays live in host memory: "
                              f"device='cpu')")
    return numpy, device, backend or safe_open.default_backend


class SafeSlice:
    """What safe_open.get_slice returns: get_shape(), get_dtype(), and
    [index] reading only the bytes the index needs."""

    def __init__(self, owner, info):
        self._owner, self._info = owner, info

    def get_shape(self):
        return list(self._info.shape)

    def get_dtype(self):
        return self._info.dtype

    def __getitem__(self, index):
        return self._owner._slice(self._info, index)


class safe_open:  # noqa: N801  (safetensors' name)
    """safe_open(filename, framework="pt", device="cpu"): a .safetensors file
    (or a sharded index JSON) whose tensors are read on demand into device
    memory (an ordinal, "cuda[:N]", torch.device, or "cpu").
    lenient=True also reads damaged files the format forbids."""

    opened = 0  # files opened by this process (patch() checks count on it)

    # backend=None: how host memory is filled, unless the call says ("mmap":
    # views of the file's mapping; "pread": the engine's reads into memory
    # of each tensor's own)
    default_backend = "mmap"

    def __init__(self, filename, framework="pt", device="cpu", lenient=False,
                 readahead=DEFAULT_READAHEAD, backend=None):
        # backend: safetensors' choice of how host memory gets the bytes
        # (transformers passes it); GPUs are always read through the engine.
        numpy, device, backend = _check_call(framework, device, backend)
        try:
            self._open_or_claim(filename, device, lenient, readahead)
        except GdunlockError as e:
            raise as_safetensors_error(e, filename) from None
        # on the CPU: views of the file's mapping (numpy: copies out of it)
        self._host_map = HostMap(self._ckpt) if self._target.target == TARGET_HOST and (
            numpy or backend == "mmap") else None
        self._numpy = numpy

    def _open_or_claim(self, filename, device, lenient, readahead):
        made = _claim_made_ahead(filename, lenient)
        if made is not None:  # its reads go on where the walk of the last shard left off
            self.__dict__.update(made.__dict__)
            made.__dict__.clear()
            made._closed = True
            self._target, self._readahead = Target(device), readahead
            self._name, self._next_file_tried = os.path.abspath(filename), False
            _alive.add(self)
        else:
            self._open(filename, device, lenient, readahead)
        with _ahead_lock:
            _open_paths[self._path] = _open_paths.get(self._path, 0) + 1
        self._counted = True
        safe_open.opened += 1

    def _open(self, filename, device, lenient, readahead):
        self._target = Target(device)
        # Kept open: every read goes through the descriptors it validated.
        self._ckpt = Checkpoint(filename, lenient=lenient)
        # the file under the name it was opened by (the next shard is found
        # by that name: huggingface_hub's cache links shards to files named
        # by their hashes) and its real path (what safe_opens of it share)
        self._name, self._path = os.path.abspath(filename), os.path.realpath(filename)
        self._lenient, self._counted = lenient, False
        self._files = self._ckpt.file_refs()
        self._infos = {t.name: t for t in self._ckpt.tensors()}
        self._metadata = self._ckpt.metadata_or_none(0)
        self._by_offset = [t.name for t in sorted(self._infos.values(),
                                                  key=lambda t: (t.file, t.file_offset))]
        self._names = _name_orders(self._infos)
        self._keys = self._names.keys
        # the walk's orders: sorted, by offset, natural (None until needed)
        self._orders = [self._keys, self._by_offset, None]
        self._positions = [self._names.at_key, {k: i for i, k in enumerate(self._by_offset)},
                           None]
        self._readahead = readahead
        self._readers = {}  # torch device -> RangeReader
        self._targets = {}  # read_to's device argument -> Target
        self._walk_target = self._target  # where the reads ahead go
        self._lock = threading.Lock()
        self._closed = False
        self._forked = False  # opened by the parent of this process (_parents_in_child)
        _alive.add(self)
        self._order, self._pos = self._orders[0], self._positions[0]
        self._ahead, self._ahead_bytes = {}, 0  # name -> [Read], in the order predicted
        self._next = 0
        self._last = None  # the key asked last
        self._window = 0
        # name with its numbers taken out -> (shape, indices): the indices the
        # family's last tensor was asked for, in order (_follow), and the
        # tensor and how many of them it has had
        self._families, self._cursor = {}, {}
        # whether _families_seen (the last walk of another file) may predict
        # this file's families, and the keys read ahead on its word
        self._hint_ok, self._hinted = True, set()
        self._whole_walk = False  # the last request was for a whole tensor
        # one rank's part of a dimension (_split_of) that two requests in a
        # row cut alike from tensors of different lengths there: it predicts
        # families not seen yet (another file's walk's, until this one's
        # says otherwise); and the last such request's split and length
        self._split = _splits_seen.get("last")
        self._split_last = None
        # while _split is only the file's first cut, until the next request:
        # the bytes it may read ahead (None once confirmed or given up)
        self._guess_room = None
        self._scanned = 0  # keys before this position were looked at with what is known now
        self._next_file_tried = False  # whether the next shard was opened ahead
        self._reserved_split = None  # the split whose parts of the file were reserved

    # -- the safetensors interface ------------------------------------------------
    def keys(self):
        self._check_open()
        return list(self._keys)

    def offset_keys(self):
        self._check_open()
        return list(self._by_offset)

    def metadata(self):
        self._check_open()
        return None if self._metadata is None else dict(self._metadata)

    def get_tensor(self, name):
        if self._host_map is not None:
            got = self._host_tensor(self._info(name), None)
            if got is not None:
                return got
        return self._request(self._info(name), None).result()

    def get_tensors(self):
        """Every tensor of the file, {name: tensor}, in file order (as
        safetensors' get_tensors())."""
        return {k: self.get_tensor(k) for k in self.offset_keys()}

    def get_slice(self, name):
        return SafeSlice(self, self._info(name))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    # -- ours ---------------------------------------------------------------------
    def close(self):
        """Waits for the reads still out, drops the tensors read ahead and
        gives the engine leases back. Tensors handed out stay valid."""
        if "_lock" not in self.__dict__:  # made ahead, then claimed by another safe_open
            return
        with self._lock:
            self._closed = True
            if self._counted:
                self._counted = False
                with _ahead_lock:
                    _open_paths[self._path] -= 1
                    if not _open_paths[self._path]:
                        del _open_paths[self._path]
            dropped = []
            self._drop_ahead(dropped)
            readers, self._readers = list(self._readers.values()), {}
        _settle(dropped)
        for reader in readers:
            reader.close()
        if self.__dict__.get("_host_map") is not None:
            self._host_map.close()
        self._ckpt.close()

    def stats(self):
        """Bytes the engine was asked to read for this file, and in how many
        requests."""
        readers = list(self._readers.values())
        return {"bytes_read": sum(r.bytes_read for r in readers),
                "requests": sum(r.requests for r in readers)}

    @property
    def device(self):
        return self._target.device

    def read_to(self, name, index, device):
        """tensor name (or index of it, None for all of it) read straight
        into fresh memory of another device than the file was opened for
        (patch() serves transformers' parameters this way, on the device
        its device_map gives each). Requests in key order, to one device,
        are read ahead as get_tensor's are, also when they come from a pool
        of threads a little out of order."""
        info = self._info(name)
        target = self._targets.get(device)
        if target is None:
            target = self._targets[device] = Target(device)
        plan = plan_tensor(info, index)
        if plan is None:
            return self._whole_then_index(info, index, target)
        return self._request(info, index, plan, target).result()

    # -- internals ----------------------------------------------------------------
    def _check_open(self):
        if self._closed:
            raise SafetensorError("GDU_ST_ERR_INVALID_ARGUMENT", "File is closed")

    def _info(self, name):
        self._check_open()
        info = self._infos.get(name)
        if info is None:
            raise SafetensorError("GDU_ST_ERR_NOT_FOUND", f"File does not contain tensor {name}")
        return info

    def _reader(self, target):
        """Under the lock: the reader for target's device, made on first use."""
        self._check_open()  # a close() racing this call keeps no lease
        reader = self._readers.get(target.device)
        if reader is None:
            reader = self._readers[target.device] = target.reader()
        return reader

    def _submit(self, info, plan):
        """Under the lock: the read of plan into memory of the walk's target."""
        target = self._walk_target
        return submit_plan(self._reader(target), target, self._files[info.file], info, plan)

    def _host_tensor(self, info, index):
        """info (index None: all of it) out of the file's mapping: a numpy
        array for framework np, else a torch view; None for the engine to
        read (a file not mapped, or a slice of a dtype torch has no view of,
        which the engine's planning cuts in bytes)."""
        if self._numpy:
            got = self._host_map.array(info, index)
            if got is None:  # the file is not mapped: its bytes through the engine
                if self._target.torch is None:
                    raise GdunlockError("GDU_ST_ERR_NO_TORCH", f"{self._ckpt.files[info.file]} "
                                        f"cannot be mapped now (replaced, removed, or on a file "
                                        f"system without mmap), and reading it otherwise needs "
                                        f"torch, which is not installed")
                raw = self._request(info, None).result()
                data = raw.reshape(-1).view(self._target.torch.uint8).numpy()
                got = self._host_map.array(info, index, data)
            return got
        if index is None:
            return self._host_map.tensor(info)
        if not self._host_map.can_slice(info):
            return None
        return self._host_map.slice(info, index)

    def _slice(self, info, index):
        self._check_open()
        if self._host_map is not None:
            part = self._host_tensor(info, (None,) if index is None else index)
            if part is not None:
                return part
        if index is None:  # tensor[None]: a new axis, not "the whole tensor"
            index = (None,)
        plan = plan_tensor(info, index)
        if plan is None:
            return self._whole_then_index(info, index, self._target)
        return self._request(info, index, plan).result()

    def _whole_then_index(self, info, index, target):
        if target is self._target:
            whole = self.get_tensor(info.name)
        else:
            whole = self.read_to(info.name, None, target.device)
        try:
            return whole[index]
        except IndexError as e:
            raise SliceError(str(e)) from None

    def _request(self, info, index, plan=None, target=None):
        """The read of info's plan into target's memory (the file's device
        when None): read ahead already, or submitted now; then the window is
        filled. Errors of reads submitted ahead for other tensors are
        theirs: they surface when those tensors are asked for."""
        if self._forked:
            raise GdunlockError("GDU_ST_ERR_ENGINE", f"{self._name} was opened by the parent "
                                f"process, and this process was forked from it since: its "
                                f"reads go through the parent's I/O engine; open the file "
                                f"again here")
        if plan is None:
            plan = plan_tensor(info, index)
        target = target or self._target
        with self._lock:
            dropped = []
            if target.device != self._walk_target.device:  # a walk to another device
                self._walk_target = target
                self._drop_ahead(dropped)
            family = _family(info.name)
            if family not in self._families and self._hint_ok:
                hint = _families_seen.get(family)
                hint = hint and self._split_over(hint, info)
                if hint is not None and hint[0] == info.shape and \
                        not _same_index(hint[1][0], index):
                    self._drop_hinted(dropped)  # another rank, another walk: none of it holds
            guessed = self._guess_room is not None  # the file's first cut, not confirmed
            kept = index if index is None else _canonical(index)
            if index is None or kept is not None:  # an index predictions can keep
                seen = self._follow(family, info.name, info.shape, kept)
                if self._families.get(family) != seen or self._whole_walk != (kept is None):
                    before = (self._expected(info, family)[0], self._split, self._whole_walk)
                    self._families[family] = seen
                    self._whole_walk = kept is None
                    self._note_split(info.shape, kept, plan.nbytes)
                    if before != (seen, self._split, self._whole_walk):
                        # what was not predictable before may be now; a family
                        # asked as predicted leaves the keys looked at as they are
                        self._scanned = 0
                    if len(_families_seen) >= 4096:
                        _families_seen.clear()
                    _families_seen[family] = seen
            if guessed and self._guess_room is not None:  # the next request did not confirm it
                self._split = self._guess_room = None
            read = self._take(info.name, plan, dropped)
            self._fill(dropped)
        _settle(dropped)
        return read

    def _follow(self, family, name, shape, index):
        """Under the lock: the family's (shape, indices) once name is asked
        with index: the indices its last tensor was asked for, in order.
        A tensor asked again with a new index adds it (a process that holds
        every rank asks each tensor for every rank's slice); the next tensor
        of the family keeps those its last one was asked for while it is
        asked as that one was."""
        last_shape, pattern = self._families.get(family, _NO_PATTERN)
        at, pos = self._cursor.get(family, (None, 0))
        if last_shape != shape or not pattern:
            # as another file's walk asked the family, while this one agrees
            hint = _families_seen.get(family, _NO_PATTERN) if self._hint_ok else _NO_PATTERN
            pattern = hint[1] if hint[0] == shape and hint[1][:1] == (index,) else (index,)
            pos = 1
        elif at != name:
            pattern = pattern[:pos]  # what the last tensor was not asked for is not a pattern
            pattern, pos = (pattern, 1) if pattern[0] == index else ((index,), 1)
        elif index in pattern[:pos]:
            pass  # asked again
        elif pos < len(pattern) and pattern[pos] == index:
            pos += 1
        elif pos < _PATTERN_MAX:
            pattern, pos = pattern[:pos] + (index,), pos + 1
        self._cursor[family] = (name, pos)
        return shape, pattern

    def _still_wanted(self, name):
        """Under the lock: the plans the family's indices still promise name,
        the tensor of the family asked last (those after the ones it was
        asked for); none once another tensor of the family was asked (a
        thread behind asking an earlier one included)."""
        family = _family(name)
        shape, pattern = self._families.get(family, _NO_PATTERN)
        at, pos = self._cursor.get(family, (None, 0))
        info = self._infos[name]
        if at != name or shape != info.shape:
            return []
        return [plan_tensor(info, index) for index in pattern[pos:]]

    def _note_split(self, shape, index, nbytes):
        """Under the lock: whether index confirms a tensor-parallel cut of
        every family (_split). One rank's part alone does not: a fixed
        range of rows looks like one; the same rank of the same number of
        ranks from a tensor of another length does. The file's first cut is
        a guess until the next request, read ahead within the window for up
        to four times its own bytes (nbytes): without it a rank's walk
        waited alone for its first tensor while the engine idled (on the
        H200 1.1-1.6 ms of an 8-way rank's 17-22,
        bench/results/2026-12-04-h200-engine-trace.md), and a wrong guess
        costs at most four times the cut read."""
        split = _split_of(shape, index) if index is not None else None
        if split is None:
            return
        length = shape[split[1]]
        last, self._split_last = self._split_last, (split, length)
        if self._split != split:
            if last is None:  # the file's first cut
                self._split, self._guess_room = split, 4 * nbytes
            else:  # the cut changed: no more guessing until confirmed again
                self._split = self._guess_room = None
        if last is not None and last[0] == split and last[1] != length:
            self._split = _splits_seen["last"] = split
            self._guess_room = None

    def _drop_hinted(self, dropped):
        """Under the lock: the last walk of another file stops predicting
        this one; what was read ahead on its word goes to dropped."""
        self._hint_ok = False
        self._scanned = 0  # families not seen yet are predicted otherwise now
        for name in self._hinted:
            self._drop(name, dropped)
        self._hinted.clear()

    def _drop(self, name, dropped):
        """Under the lock: the reads ahead of name, if any, go to dropped."""
        for read in self._ahead.pop(name, ()):
            dropped.append(read)
            self._ahead_bytes -= read.plan.nbytes

    def _drop_ahead(self, dropped):
        """Under the lock: everything read ahead goes to dropped (to be
        settled outside the lock); the window starts over."""
        dropped += [r for reads in self._ahead.values() for r in reads]
        self._ahead, self._ahead_bytes, self._window, self._scanned = {}, 0, 0, 0

    def _in_step(self, name):
        """Under the lock: whether asking for name continues the walk. The
        walk keeps its order (sorted, by offset or natural) while name comes
        a few places after the key asked before it (the caller skips keys it
        does not need, norms when it shards), else follows the order in
        which name comes soonest after it; a key a few places from the next
        one (a pool of threads asks a little out of order) or one read ahead
        is in step too."""
        if self._last is not None:
            if 0 < self._pos[name] - self._pos[self._last] < _SKIP:
                return True
            best = None
            for kind in range(len(self._orders)):
                order, pos = self._order_of(kind)
                d = pos[name] - pos[self._last]
                if 0 < d < _SKIP and (best is None or d < best[0]):
                    best = (d, order, pos)
            if best is not None:
                self._switch(best[1], best[2])
                return True
        return name in self._ahead or abs(self._pos[name] - self._next) < _SKIP

    def _order_of(self, kind):
        """Under the lock: order kind of the walk's orders and its
        positions, the natural one worked out when first asked for."""
        if self._orders[kind] is None:
            self._orders[kind], self._positions[kind] = self._names.natural()
        return self._orders[kind], self._positions[kind]

    def _switch(self, order, pos):
        """Under the lock: the walk follows order from the key asked last
        on; what was read ahead stays for the keys it holds."""
        if order is not self._order:
            self._order, self._pos = order, pos
            self._next, self._scanned = pos[self._last] + 1, 0

    def _take(self, name, plan, dropped):
        """The read of name with plan. A request in step (_in_step) is a hit:
        the window grows; a key the walk has passed is served on its own; any
        other request drops what was read ahead and starts again from there.
        Under the lock."""
        straggler = name in self._ahead and self._pos[name] < self._next
        if straggler:  # read ahead for a thread left behind: the walk goes on
            i = self._pos[name]
        elif self._in_step(name):
            i = self._pos[name]
            self._window = min(max(2 * self._window, _FIRST_WINDOW), self._readahead)
        elif self._pos[name] < self._next:  # a thread left behind: the walk goes on
            i, straggler = self._pos[name], True
        else:
            i = self._pos[name]
            self._drop_ahead(dropped)
            self._next = i
        read = None
        reads = self._ahead.get(name, [])
        for j, r in enumerate(reads):
            if r.plan == plan:
                read = reads.pop(j)
                self._ahead_bytes -= plan.nbytes
                break
        if reads:
            wanted = self._still_wanted(name)
            for r in [r for r in reads if r.plan not in wanted]:  # read ahead with another index
                reads.remove(r)
                dropped.append(r)
                self._ahead_bytes -= r.plan.nbytes
        if not reads:
            self._ahead.pop(name, None)
        self._hinted.discard(name)
        if read is None:
            read = self._submit(self._infos[name], plan)
        if not straggler:
            self._next = max(self._next, i + 1)
            self._last = name
        return read

    def _expected(self, info, family):
        """Under the lock: the (shape, indices) the next requests for info's
        tensor will most likely have, or None when unknown, and whether it
        is a guess not confirmed by this file's walk: the family's last
        indices; for a family not seen yet, the whole tensor while the
        caller reads whole tensors, else the indices the family got in
        another file until this file's walk contradicts that, else the cut
        of the last split."""
        seen = self._families.get(family)
        if seen is not None:
            return seen, False
        if self._whole_walk:
            return (info.shape, (None,)), False
        if self._hint_ok:  # as another shard of the checkpoint was walked
            seen = _families_seen.get(family)
            if seen is not None:
                return self._split_over(seen, info), True
        if self._split is not None:
            # tensor-parallel ranks cut every layer alike; a wrong guess is
            # dropped when the tensor is asked for (_take)
            index = _split_index(info.shape, self._split)
            if index:
                return (info.shape, (index,)), True
        return None, True

    def _split_over(self, seen, info):
        """Under the lock: another walk's (shape, indices) of a family,
        or, when that walk took one rank's part where the cut confirmed
        last (_split) takes another rank's of the same split, this rank's
        part: the family was last asked before the ranks moved on."""
        if self._split is None or len(seen[1]) != 1 or seen[1][0] is None:
            return seen
        cut = _split_of(seen[0], seen[1][0])
        if cut is None or cut[:3] != self._split[:3] or cut == self._split:
            return seen
        index = _split_index(info.shape, self._split)
        return (info.shape, (index,)) if index else seen

    def _predict(self, name):
        """The plans the next requests for name will most likely have
        (_expected), none when unknown, and whether they are a guess."""
        info = self._infos[name]
        seen, hinted = self._expected(info, _family(name))
        if seen is None or seen[0] != info.shape:
            return [], False
        plans = []
        for index in seen[1]:
            try:
                plan = plan_tensor(info, index)
            except SliceError:
                return [], False
            if plan is not None and plan not in plans:
                plans.append(plan)
        return plans, hinted

    def _evict_passed(self, dropped):
        """Under the lock: reads ahead of keys the walk has passed (skipped,
        or left for a thread behind; not the key asked last, which may be
        asked again with its other indices) go to dropped, to make room in
        the window; kept until the room is needed."""
        for name in [k for k in self._ahead if self._pos[k] < self._next and k != self._last]:
            self._drop(name, dropped)

    def _fill(self, dropped):
        """Under the lock: reads ahead, from the next key on, up to the
        window, the keys whose request can be predicted (at most _SCAN keys
        ahead of the next; keys looked at already with what is known now are
        not looked at again), first making room from reads of keys the walk
        has passed when the window is full. A read that cannot be submitted (its shard
        unreadable, memory short) ends the filling quietly: the error is the
        request's that needs those bytes."""
        if self._last is not None and self._window:  # the key asked last: its other indices
            wanted = self._still_wanted(self._last)
            if wanted:
                self._read_ahead([(self._last, self._not_ahead(self._last, wanted), False)])
        i = max(self._next, self._scanned)
        stop = min(len(self._order), self._next + _SCAN)
        if i - self._next > _SCAN // 2:  # far enough ahead: small tensors go in groups
            stop = i
        if i < stop and self._ahead_bytes >= self._window:
            self._evict_passed(dropped)
        # the window takes one tensor more than it has room for (a tensor
        # larger than the window is read all the same); a guess does not
        room = self._window - self._ahead_bytes
        guess = None if self._guess_room is None else self._guess_room - self._ahead_bytes
        batch, first = [], i
        while i < stop and room > 0:
            name = self._order[i]
            plans, hinted = self._predict(name)  # each plan once
            if name in self._ahead:
                plans = self._not_ahead(name, plans)
            need = sum(plan.nbytes for plan in plans)
            if guess is not None:
                if need > guess:
                    break
                guess -= need
            batch.append((name, plans, hinted))
            room -= need
            i += 1
        sizes = None
        if batch and (self._split is None or self._split != self._reserved_split):
            sizes = [plan.nbytes for _, plans, _ in batch for plan in plans] + \
                self._rest_of_split(i)
        whole = self._read_ahead(batch, sizes) if batch else 0
        if whole < len(batch):
            i = first + whole
        self._scanned = i
        # past a quarter of the file: its walk has shown how the families
        # are asked by now (a layer's worth), and the next shard's reads are
        # predicted so; at the middle the engine ran dry while the caller
        # opened it (bench/results/2026-12-04-h200-engine-trace.md)
        if i == len(self._order) and self._ahead_bytes < self._window and \
                not self._next_file_tried and 4 * self._next >= len(self._order):
            self._next_file_tried = True
            self._open_next_file(min(self._window - self._ahead_bytes, _NEXT_FILE_AHEAD))

    def _rest_of_split(self, i):
        """Under the lock: when the file's split is confirmed, the split's
        parts of the keys from position i on, announced with the batch
        before them, once: the later batches of the file come out of that
        block. torch asks the driver for every block it lacks, about 0.1-0.4
        ms each on the H200, and a block a batch left a first rank paying
        for several (bench/results/2026-12-04-h200-split-reserve.md)."""
        if self._split is None or self._guess_room is not None:
            return []
        self._reserved_split = self._split
        parts = []
        for name in self._order[i:]:
            info = self._infos[name]
            index = _split_index(info.shape, self._split)
            if index is not None:
                parts.append(plan_tensor(info, index).nbytes)
        return parts

    def _open_next_file(self, room):
        """Under the lock: the walk has queued the last reads of this file;
        the next shard of the checkpoint, unless the caller holds it open
        already, is opened and its first room bytes read ahead as this
        walk predicts them, for safe_open of it to claim. Quietly nothing
        when it cannot be, or when its header is too large to open on a
        guess (_NEXT_FILE_HEADER_MAX)."""
        if len(self._files) != 1:
            return
        path = _next_shard(self._name)
        if path is None:
            return
        key = os.path.realpath(path)
        with _ahead_lock:
            if key in _made_ahead or key in _open_paths:
                return
        made = safe_open.__new__(safe_open)
        try:
            if _header_bytes(key) > _NEXT_FILE_HEADER_MAX:
                return
            stat = _stat_key(key)
            made._open(path, self._walk_target.device, self._lenient, self._readahead)
        except Exception:  # noqa: BLE001  (the caller's own open reports it)
            return
        kind = next(j for j, order in enumerate(self._orders) if order is self._order)
        made._order, made._pos = made._order_of(kind)
        made._window = room
        made._next_file_tried = True  # until claimed: no chain of files nobody opened
        dropped = []
        try:
            with made._lock:
                made._fill(dropped)
        except Exception:  # noqa: BLE001  (a guess failing must not fail this file's request)
            _settle(dropped)
            made.close()
            return
        _settle(dropped)
        if not _keep_made_ahead(key, made, stat):
            made.close()

    def _not_ahead(self, name, plans):
        """Under the lock: those of plans not read ahead for name yet, each
        once."""
        reads, new = self._ahead.get(name, ()), []
        for plan in plans:
            if plan is not None and plan not in new and not any(r.plan == plan for r in reads):
                new.append(plan)
        return new

    def _read_group(self, target, group):
        """Under the lock: reads ahead of group [(position in the batch,
        name, info, plan, hinted)], small whole tensors of one file, in one
        request (submit_group)."""
        info = group[0][2]
        reads = submit_group(self._reader(target), target, self._files[info.file],
                             [(info, plan) for _, _, info, plan, _ in group])
        for (_, name, _, plan, hinted), read in zip(group, reads):
            self._ahead.setdefault(name, []).append(read)
            self._ahead_bytes += plan.nbytes
            if hinted:
                self._hinted.add(name)

    def _read_ahead(self, batch, sizes=None):
        """Under the lock: reads ahead of each (name, plans, hinted) of
        batch (plans not read ahead yet: _not_ahead), every one queued
        before any is given memory, so that the engine reads while torch
        allocates; sizes, when given, are announced to torch's allocator in
        between (Target.reserve), the block it takes from the driver then
        allocated with the batch's reads under way. Returns how many of
        batch's names were read ahead whole: a read that cannot be queued
        or given memory closes the window there, and the reads queued after
        it are cancelled."""
        target, queued, whole, placed = self._walk_target, [], len(batch), 0
        group = []  # small whole tensors of one file, read in one request
        try:
            for k, (name, plans, hinted) in enumerate(batch):
                info = self._infos[name]
                try:
                    if len(plans) == 1 and groupable(target, info, plans[0]):
                        if group and (group[0][2].file != info.file or len(group) == GROUP_READS):
                            self._read_group(target, group)
                            group = []
                        group.append((k, name, info, plans[0], hinted))
                        continue
                    for plan in plans:
                        queued.append((k, name, info, plan, hinted, queue_plan(
                            self._reader(target), self._files[info.file], info, plan)))
                except GdunlockError:
                    whole = group[0][0] if group else k
                    group = []
                    break
            if group:
                try:
                    self._read_group(target, group)
                except GdunlockError:
                    whole = group[0][0]
            if sizes is not None:
                target.reserve(sizes)
            for k, name, info, plan, hinted, pending in queued:
                placed += 1  # given its memory, or cancelled by place_plan when it raises
                try:
                    read = place_plan(pending, target, info, plan)
                except GdunlockError:
                    whole = min(whole, k)
                    break
                self._ahead.setdefault(name, []).append(read)
                self._ahead_bytes += plan.nbytes
                if hinted:
                    self._hinted.add(name)
        finally:
            for *_, pending in queued[placed:]:  # left without memory: nothing holds them
                pending.cancel()
        if whole < len(batch):
            self._window = 0
        return whole
