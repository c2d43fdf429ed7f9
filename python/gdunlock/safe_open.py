"""safe_open: the interface of safetensors.safe_open (keys, metadata,
get_tensor, get_slice, a context manager) over gdunlock's engine. Each
tensor comes back in its own allocation on the device asked for; the bytes
move through the process's kept I/O engine straight into that memory.

Loading every key one by one runs at the whole-file speed: while the caller
asks for the keys in order (sorted, as keys() lists them, or by offset),
the reads of the next tensors are already queued (a read-ahead window that
doubles with every hit, up to `readahead` bytes, and resets on a jump). A
slice reads only the byte ranges it needs."""
import os
import threading

from ._lib import TARGET_GPU, TARGET_HOST, GdunlockError
from .checkpoint import Checkpoint, parse_device
from .reader import RangeReader, SliceError, plan_slice

_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8,
         "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16,
         "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64,
         "I64": 64, "U64": 64}
_FRAMEWORKS = ("pt", "torch", "pytorch")
_FIRST_WINDOW = 64 << 20
DEFAULT_READAHEAD = 1 << 30


def _torch():
    try:
        import torch
    except ImportError:
        raise GdunlockError("GDU_ST_ERR_NO_TORCH", "tensors need torch, which is not "
                            "installed") from None
    return torch


class Target:
    """Where tensors go: host memory or one GPU; allocates there."""

    def __init__(self, device):
        if hasattr(device, "type") and hasattr(device, "index") and device.type == "cuda" \
                and device.index is None:
            device = "cuda"
        target, gpus = parse_device(device)
        if len(gpus) != 1:
            raise ValueError(f"one device, not {device!r}")
        self.torch = _torch()
        self.target = target
        self.ordinal = gpus[0]
        self.device = self.torch.device("cpu") if target == TARGET_HOST else \
            self.torch.device("cuda", self.ordinal)

    def reader(self):
        return RangeReader(self.target, self.ordinal)

    def empty(self, nbytes):
        """A 1-D uint8 tensor of nbytes on the device. The engine copies on
        its own streams, which wait for the legacy default stream's work but
        not for other streams': a caller on a side stream is synchronized
        first, so that memory its kernels were still using is not written."""
        try:
            buf = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError, a bad device
            code = "GDU_ST_ERR_DEVICE_MEMORY" if "out of memory" in str(e).lower() else \
                "GDU_ST_ERR_NO_CUDA"
            raise GdunlockError(code, f"{nbytes} bytes on {self.device}: "
                                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        if self.target == TARGET_GPU:
            stream = self.torch.cuda.current_stream(self.device)
            if stream != self.torch.cuda.default_stream(self.device):
                stream.synchronize()
        return buf


class Read:
    """A submitted read of a tensor (or a box of it) into buf."""

    def __init__(self, pending, buf, info, box, post):
        self.pending, self.buf, self.info, self.box, self.post = pending, buf, info, box, post

    def result(self):
        from .torch_bridge import typed_view

        self.pending.wait()
        typed = typed_view(self.buf, self.info.dtype, self.box)
        if self.post is None:
            return typed
        if typed is not self.buf or self.info.dtype in ("U8", "I8", "BOOL"):
            return typed[self.post]
        # A dtype this torch lacks comes back as raw bytes, as whole tensors
        # do: sliced through an integer type of its width.
        width = _BITS[self.info.dtype] // 8
        stand_in = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}[width]
        import torch
        part = self.buf.view(getattr(torch, stand_in)).reshape(self.box)[self.post]
        return part.reshape(-1).view(torch.uint8)


def submit_tensor(reader, target, path, info, index=None):
    """Queues the read of tensor info (or of index of it) into fresh memory
    of target. Returns a Read, or None when index needs the whole tensor
    (advanced indexing, sub-byte dtypes)."""
    bits = _BITS[info.dtype]
    if index is None:
        runs, box, post = ([(0, info.nbytes)] if info.nbytes else []), list(info.shape), None
    elif bits % 8:
        return None
    else:
        try:
            runs, box, post = plan_slice(list(info.shape), bits, index)
        except TypeError:
            return None
    total = sum(n for _, n in runs)
    buf = target.empty(total)
    address, extents = buf.data_ptr(), []
    for offset, n in runs:
        extents.append((info.file_offset + offset, n, address))
        address += n
    return Read(reader.submit(path, extents, keep=buf), buf, info, box, post)


def _settle(reads):
    """Waits for reads nobody will take (read ahead, then not asked for)."""
    for read in reads:
        try:
            read.pending.wait()
        except GdunlockError:
            pass


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

    def __init__(self, filename, framework="pt", device="cpu", lenient=False,
                 readahead=DEFAULT_READAHEAD, backend=None):
        # backend: safetensors' choice of how to read the file (transformers
        # passes it); gdunlock always reads through its own engine.
        if framework not in _FRAMEWORKS:
            raise GdunlockError("GDU_ST_ERR_FRAMEWORK", f"framework {framework!r}: gdunlock "
                                f"returns torch tensors ('pt')")
        self._target = Target(device)
        self._ckpt = Checkpoint(os.fspath(filename), lenient=lenient)
        self._files = self._ckpt.files
        self._infos = {t.name: t for t in self._ckpt.tensors()}
        self._metadata = self._ckpt.metadata_or_none(0)
        self._ckpt.close()
        self._keys = sorted(self._infos)
        self._by_offset = [t.name for t in sorted(self._infos.values(),
                                                  key=lambda t: (t.file, t.file_offset))]
        self._readahead = readahead
        self._reader = None
        self._lock = threading.Lock()
        self._closed = False
        self._order, self._pos = self._keys, {k: i for i, k in enumerate(self._keys)}
        self._ahead, self._ahead_bytes = {}, 0
        self._next = self._tail = 0
        self._window = 0
        safe_open.opened += 1

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
        self._info(name)
        with self._lock:
            dropped = []
            read = self._take(name, dropped)
            self._fill()
        _settle(dropped)
        return read.result()

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
        gives the engine lease back. Tensors handed out stay valid."""
        with self._lock:
            self._closed = True
            dropped = list(self._ahead.values())
            self._ahead, self._ahead_bytes = {}, 0
            reader, self._reader = self._reader, None
        _settle(dropped)
        if reader is not None:
            reader.close()

    def stats(self):
        """Bytes the engine was asked to read for this file, and in how many
        requests."""
        r = self._reader
        return {"bytes_read": r.bytes_read if r else 0, "requests": r.requests if r else 0}

    @property
    def device(self):
        return self._target.device

    # -- internals ----------------------------------------------------------------
    def _check_open(self):
        if self._closed:
            raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", "the file is closed")

    def _info(self, name):
        self._check_open()
        info = self._infos.get(name)
        if info is None:
            raise GdunlockError("GDU_ST_ERR_NOT_FOUND", f"File does not contain tensor {name}")
        return info

    def _get_reader(self):
        if self._reader is None:
            self._reader = self._target.reader()
        return self._reader

    def _submit(self, name, index=None):
        info = self._infos[name]
        return submit_tensor(self._get_reader(), self._target, self._files[info.file], info,
                             index)

    def _take(self, name, dropped):
        """The read of name: read ahead already, or submitted now. A request
        for the key after the last one is a hit: the window grows; any other
        request drops what was read ahead and starts again from there. Callers
        hold the lock."""
        i = self._pos[name]
        if i != self._next and self._next > 0:
            # Maybe the caller walks the other order (offset_keys).
            other = self._by_offset if self._order is self._keys else self._keys
            prev = self._order[self._next - 1]
            j = other.index(prev) if prev in other else -1
            if 0 <= j < len(other) - 1 and other[j + 1] == name:
                self._order = other
                self._pos = {k: n for n, k in enumerate(other)}
                i = self._next = self._tail = j + 1  # a hit in that order; what was
                # read ahead in the other stays for the keys it holds
        read = self._ahead.pop(name, None)
        if read is not None:
            self._ahead_bytes -= read.info.nbytes
            self._window = min(max(2 * self._window, _FIRST_WINDOW), self._readahead)
        elif i == self._next:
            self._window = min(max(2 * self._window, _FIRST_WINDOW), self._readahead)
            read = self._submit(name)
            self._tail = max(self._tail, i + 1)
        else:
            dropped += self._ahead.values()
            self._ahead, self._ahead_bytes, self._window = {}, 0, 0
            read = self._submit(name)
            self._tail = i + 1
        self._next = i + 1
        return read

    def _fill(self):
        while self._tail < len(self._order) and self._ahead_bytes < self._window:
            name = self._order[self._tail]
            if name in self._ahead:  # read ahead already, in the other order
                self._tail += 1
                continue
            try:
                self._ahead[name] = self._submit(name)
            except GdunlockError as e:
                if e.code != "GDU_ST_ERR_DEVICE_MEMORY":
                    raise
                self._window = 0  # memory is short: read what is asked for, no more
                return
            self._tail += 1
            self._ahead_bytes += self._infos[name].nbytes

    def _slice(self, info, index):
        self._check_open()
        with self._lock:
            read = submit_tensor(self._get_reader(), self._target, self._files[info.file], info,
                                 index)
        if read is not None:
            return read.result()
        whole = self.get_tensor(info.name)
        try:
            return whole[index]
        except IndexError as e:
            raise SliceError(str(e)) from None
