"""safe_open: the interface of safetensors.safe_open (keys, metadata,
get_tensor, get_tensors, get_slice, a context manager) over gdunlock's
engine, with safetensors' exception types (errors.py). On a GPU each
tensor comes back in its own allocation; the bytes move through the
process's kept I/O engine straight into that memory. On the CPU tensors
are views of the file's mapping, as safetensors' are (host_map.py), unless
backend="pread" asks for the engine's reads into memory of their own.

The engine's reads are read ahead of the caller's requests by the file's
Walk (walk.py), which learns from earlier files' walks (walk_memory.py);
a slice reads only the byte ranges it needs (plans.py). A caller that opens
a checkpoint's numbered shards in turn finds the next one opened, its
first tensors on their way (shards_ahead.py)."""
import os
import threading
import weakref

from ._lib import TARGET_HOST, GdunlockError
from .checkpoint import Checkpoint, parse_device
from .errors import InvalidDeviceError, SafetensorError, as_safetensors_error
from .host_map import HostMap
from .plans import PlanReads, plan_tensor, settle, submit_plan
from .shards_ahead import NEXT_FILE_AHEAD, registry
from .slicing import SliceError
from .target import Target, need_torch
from .walk import Walk
from .walk_memory import memory

_FRAMEWORKS = ("pt", "torch", "pytorch")
_NUMPY = ("np", "numpy")
# frameworks safetensors serves and gdunlock does not
_THEIRS_ONLY = ("tf", "tensorflow", "jax", "flax", "mlx", "paddle")
_BACKENDS = ("mmap", "pread")
DEFAULT_READAHEAD = 1 << 30


# Every safe_open alive, those made ahead included. In a child of fork()
# they are the parent's: a thread of the parent inside one of their calls
# held its lock, held for ever in the child (which has only the forking
# thread), and their reads would go to the parent's engine, which has no
# workers there. The child makes their locks anew and has their reads fail
# naming the fork (what the parent made ahead the registry forgets).
_alive = weakref.WeakSet()


def _parents_in_child():
    for f in list(_alive):
        if "_lock" in f.__dict__:  # (not one whose state another took over)
            f._lock, f._forked = threading.Lock(), True


os.register_at_fork(after_in_child=_parents_in_child)


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
        need_torch()  # GDU_ST_ERR_NO_TORCH before the open, as before
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
        made = registry.claim(filename, lenient)
        if made is not None:  # its reads go on where the walk of the last shard left off
            self.__dict__.update(made.__dict__)
            made.__dict__.clear()
            made._closed = True
            self._target, self._name = Target(device), os.path.abspath(filename)
            self._walk.readahead, self._walk.next_file_tried = readahead, False
            self._bind_walk()
            _alive.add(self)
        else:
            self._open(filename, device, lenient, readahead)
        registry.held(self._path)
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
        names = memory.name_orders(self._infos)
        self._keys = names.keys
        self._readers = {}  # torch device -> RangeReader
        self._targets = {}  # read_to's device argument -> Target
        self._walk_target = self._target  # where the reads ahead go
        self._lock = threading.Lock()
        self._closed = False
        self._forked = False  # opened by the parent of this process (_parents_in_child)
        _alive.add(self)
        self._walk = Walk(self._infos, names, self._by_offset, None, None, None, readahead,
                          memory)
        self._bind_walk()

    def _bind_walk(self):
        """The walk reads through this safe_open (a safe_open made ahead
        hands its walk to the one that claims it). Through a weak reference:
        a safe_open dropped unclosed is closed by its __del__ at once."""
        me = weakref.ref(self)
        self._walk.submit = lambda info, plan: me()._submit(info, plan)
        self._walk.open_next = lambda room: me()._open_next_file(room)
        self._walk.reads = self._reads_to(self._walk_target)

    def _reads_to(self, target):
        """The reads ahead into target's memory (PlanReads) of this file."""
        me = weakref.ref(self)
        return PlanReads(lambda: me()._reader(target), target, self._files)

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
                registry.let_go(self._path)
            dropped = []
            self._walk.drop_ahead(dropped)
            readers, self._readers = list(self._readers.values()), {}
        settle(dropped)
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
        when None): read ahead already, or submitted now (the walk's).
        Errors of reads submitted ahead for other tensors are theirs: they
        surface when those tensors are asked for."""
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
                self._walk.retarget(self._reads_to(target), dropped)
            read = self._walk.request(info, index, plan, dropped)
        settle(dropped)
        return read

    def _open_next_file(self, room):
        """Under the lock: the walk has queued the last reads of this file;
        the next shard of the checkpoint is opened and its first room bytes
        (NEXT_FILE_AHEAD at most) read ahead as this walk predicts them,
        for safe_open of it to claim (registry.open_after)."""
        if len(self._files) == 1:
            registry.open_after(self._name, self._lenient,
                                lambda path: self._opened_ahead(path, room))

    def _opened_ahead(self, path, room):
        """A safe_open of path whose walk follows this one's, its first room
        bytes read ahead; None when it cannot be had."""
        made = safe_open.__new__(safe_open)
        try:
            made._open(path, self._walk_target.device, self._lenient, self._walk.readahead)
        except Exception:  # noqa: BLE001  (the caller's own open reports it)
            return None
        made._walk.start_as(self._walk.order_kind(), min(room, NEXT_FILE_AHEAD))
        dropped = []
        try:
            with made._lock:
                made._walk.fill(dropped)
        except Exception:  # noqa: BLE001  (a guess failing must not fail this file's request)
            settle(dropped)
            made.close()
            return None
        settle(dropped)
        return made
