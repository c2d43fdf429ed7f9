"""A safetensors checkpoint opened through the C loader: header table,
loading into GPU or host memory, verification, and raw access to the loaded
bytes (no torch needed)."""
import ctypes
import itertools
import operator
import os
from collections import namedtuple

from ._lib import (FOLDER, LENIENT, StError, StLoadOptions, TARGET_GPU, TARGET_HOST, GdunlockError, check,
                   lib)

def _text(address, length):
    """UTF-8 bytes at address (NUL bytes included) as str."""
    return ctypes.string_at(address, length).decode() if length else ""


_bits_of = {}  # dtype name -> bits per element, as the library's table has them


def dtype_bits(name):
    """The bits per element of safetensors dtype name, from the library's
    dtype table (gdu_st_dtype_bits), the one the C loader checks sizes
    with; ValueError for a name it does not know."""
    bits = _bits_of.get(name)
    if bits is None:
        code = ctypes.c_int()
        if lib().gdu_st_dtype_from_name(name.encode(), ctypes.byref(code)) != 0:
            raise ValueError(f"no safetensors dtype is named {name!r}")
        bits = _bits_of[name] = lib().gdu_st_dtype_bits(code.value)
    return bits


class TensorInfo(namedtuple("TensorInfo", "name dtype shape nbytes address device file "
                                          "file_offset")):
    """A tensor of an open Checkpoint; bits is its bits per element
    (dtype_bits), looked up rather than kept: a field of its own made every
    TensorInfo of a million-tensor file 16 bytes larger."""
    __slots__ = ()

    @property
    def bits(self):
        return dtype_bits(self.dtype)


def parse_device(device):
    """device -> (target, [gpu ordinals]). Accepts 0, "cuda", "cuda:1",
    torch.device, "cpu", or a list of GPUs (files placed round-robin; "cpu"
    has no place in such a list)."""
    if isinstance(device, (list, tuple)):
        if not device:
            raise ValueError("empty device list")
        gpus = []
        for d in device:
            target, ordinals = parse_device(d)
            if target != TARGET_GPU:
                raise ValueError(f"a device list names GPUs only, not {d!r} (load into host "
                                 f"memory with device='cpu' alone)")
            gpus += ordinals
        return TARGET_GPU, gpus
    if hasattr(device, "type") and hasattr(device, "index"):  # torch.device
        device = device.type if device.index is None else f"{device.type}:{device.index}"
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return TARGET_GPU, [device]
    if device == "cpu":
        return TARGET_HOST, [0]
    if device == "cuda":
        return TARGET_GPU, [0]
    if isinstance(device, str) and device.startswith("cuda:") and device[5:].isdigit():
        return TARGET_GPU, [int(device[5:])]
    raise ValueError(f"device must be a GPU ordinal, 'cuda[:N]', 'cpu' or a list of ordinals, "
                     f"not {device!r}")


class FileRef:
    """One file of an open Checkpoint, as a reader opens it on an engine:
    through the descriptor the checkpoint validated (gdu_st_model_file_open).
    It keeps the checkpoint open while it lives."""

    def __init__(self, checkpoint, index, path):
        self.checkpoint, self.index, self.path = checkpoint, index, path
        self.key = (checkpoint.serial, index)

    def open_on(self, engine):
        """A gdu_io_file handle on engine (close it with gdu_io_close)."""
        ckpt = self.checkpoint
        ckpt._require_open()
        f, err = ctypes.c_void_p(), StError()
        check(ckpt._lib.gdu_st_model_file_open(ckpt._model, self.index, engine, ctypes.byref(f),
                                               ctypes.byref(err)), err)
        return f


# A number no other Checkpoint of the process gets: readers key the files
# they keep open by it. id() was reused by the next Checkpoint once one was
# freed, and a reader then read the new file's tensors through the old
# file's descriptor.
_serials = itertools.count()


class Checkpoint:
    """Opens (and validates) a .safetensors file or a sharded index JSON.
    Validation is the reference implementation's (no holes, no trailing
    bytes, ...); lenient=True also reads damaged files the format forbids;
    folder=True takes a model's folder for its index, else its .safetensors
    files (as weights_iterator reads a folder)."""

    def __init__(self, path, lenient=False, folder=False):
        self.serial = next(_serials)
        self._model = ctypes.c_void_p()
        self._lib = lib()
        self.path = os.fspath(path)
        self.lenient = bool(lenient)
        err = StError()
        flags = (LENIENT if lenient else 0) | (FOLDER if folder else 0)
        check(self._lib.gdu_st_open_flags(os.fsencode(self.path), flags,
                                          ctypes.byref(self._model), ctypes.byref(err)), err)
        self.loaded = False

    def close(self):
        """Drops the checkpoint's references; memory still used by exported
        tensors stays until they die."""
        if self._model:
            self._lib.gdu_st_model_free(self._model)
            self._model = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _require_open(self):
        if not self._model:
            raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", "the checkpoint is closed")

    def _index(self, index, count, what):
        """index as a position among count (negative counts from the end,
        as for a list); IndexError out of range, TypeError for a non-integer."""
        i = operator.index(index)
        if not -count <= i < count:
            raise IndexError(f"{what} index {index} is out of range: the checkpoint has {count} "
                             f"{what}s")
        return i + count if i < 0 else i

    def __len__(self):
        self._require_open()
        return self._lib.gdu_st_model_tensor_count(self._model)

    def tensor(self, index):
        self._require_open()
        return self._tensor(self._index(index, len(self), "tensor"), {})

    def tensors(self):
        # one pass without the checks of tensor(): safe_open makes these at
        # every open, a rank of a tensor-parallel load once per shard
        self._require_open()
        dtypes = {}
        return [self._tensor(i, dtypes) for i in range(len(self))]

    def _tensor(self, index, dtypes):
        """TensorInfo of tensor index (in range); dtypes caches the names of
        the dtype codes seen."""
        t = self._lib.gdu_st_model_tensor(self._model, index).contents
        dtype = dtypes.get(t.dtype)
        if dtype is None:
            dtype = dtypes[t.dtype] = self._lib.gdu_st_dtype_name(t.dtype).decode()
        return TensorInfo(_text(t.name, t.name_len), dtype, tuple(t.shape[:t.ndim]), t.nbytes,
                          t.address, t.device, t.file, t.file_offset)

    @property
    def files(self):
        self._require_open()
        n = self._lib.gdu_st_model_file_count(self._model)
        return [os.fsdecode(self._lib.gdu_st_model_file_path(self._model, i)) for i in range(n)]

    @property
    def file_count(self):
        self._require_open()
        return self._lib.gdu_st_model_file_count(self._model)

    def file_ref(self, index):
        """A FileRef to file index, for readers: what they read is the file
        this checkpoint validated, whatever its path names by now. Only its
        own path is made: readers ask for every file's, and making the whole
        list for each made opening a checkpoint of N shards cost N * N."""
        self._require_open()
        index = self._index(index, self._lib.gdu_st_model_file_count(self._model), "file")
        return FileRef(self, index, os.fsdecode(self._lib.gdu_st_model_file_path(self._model,
                                                                                 index)))

    def file_refs(self):
        """file_ref of every file, in order, their paths made once."""
        return [FileRef(self, i, path) for i, path in enumerate(self.files)]

    def tensors_by_file(self):
        """Yields (FileRef, [TensorInfo in file offset order]) file by file,
        each file's made when the caller reaches it: a walk of a checkpoint
        of N shards holds one shard's, not every shard's, from the start."""
        self._require_open()
        start, dtypes, lib_ = 0, {}, self._lib
        for f in range(lib_.gdu_st_model_file_count(self._model)):
            self._require_open()
            count = lib_.gdu_st_header_tensor_count(lib_.gdu_st_model_file_header(self._model, f))
            # the table holds the tensors file by file, each file's in
            # offset order (gdu_st_tensor)
            yield FileRef(self, f, os.fsdecode(lib_.gdu_st_model_file_path(self._model, f))), \
                [self._tensor(i, dtypes) for i in range(start, start + count)]
            start += count

    def metadata(self, file=0):
        """The __metadata__ map of one file ({} when it has none)."""
        return self.metadata_or_none(file) or {}

    def metadata_or_none(self, file=0):
        """The __metadata__ map of one file, None when absent or null (as
        safetensors' safe_open.metadata() answers)."""
        self._require_open()
        file = self._index(file, self._lib.gdu_st_model_file_count(self._model), "file")
        header = self._lib.gdu_st_model_file_header(self._model, file)
        if not self._lib.gdu_st_header_has_metadata(header):
            return None
        out = {}
        key, value = ctypes.c_void_p(), ctypes.c_void_p()
        key_len, value_len = ctypes.c_size_t(), ctypes.c_size_t()
        for i in range(self._lib.gdu_st_header_metadata_count(header)):
            self._lib.gdu_st_header_metadata(header, i, ctypes.byref(key), ctypes.byref(key_len),
                                             ctypes.byref(value), ctypes.byref(value_len))
            out[_text(key.value, key_len.value)] = _text(value.value, value_len.value)
        return out

    def load(self, device=0):
        """Loads every tensor into GPU memory (device: see parse_device) or,
        with device="cpu", into (pinned) host memory."""
        self.load_start(device)
        self.load_finish()

    def load_start(self, device=0):
        """load's first half: the memory allocated and every read submitted.
        From here tensor() has addresses and dlpack() exports, but the bytes
        are there only once load_finish() has returned."""
        self._require_open()
        target, gpus = parse_device(device)
        arr = (ctypes.c_int * len(gpus))(*gpus)
        opts = StLoadOptions(target=target, gpus=arr, gpu_count=len(gpus))
        err = StError()
        check(self._lib.gdu_st_load_start(self._model, ctypes.byref(opts), ctypes.byref(err)), err)

    def load_finish(self):
        """Waits for the reads load_start submitted."""
        self._require_open()
        err = StError()
        check(self._lib.gdu_st_load_finish(self._model, ctypes.byref(err)), err)
        self.loaded = True

    def verify(self):
        """Reads the loaded bytes back and compares them with the files."""
        self._require_open()
        err = StError()
        check(self._lib.gdu_st_verify(self._model, ctypes.byref(err)), err)

    def stats(self):
        self._require_open()
        s = self._lib.gdu_st_model_stats(self._model)
        return {"files": s.files, "tensors": s.tensors, "tensor_bytes": s.tensor_bytes,
                "read_bytes": s.read_bytes, "seconds": s.seconds,
                "backend": s.backend.decode(), "reason": s.reason.decode(errors="replace"),
                "memory": s.memory.decode(), "alloc_seconds": s.alloc_seconds,
                "engine_seconds": s.engine_seconds, "transfer_seconds": s.transfer_seconds}

    def host_bytes(self, index):
        """The loaded bytes of a tensor in host memory (device="cpu" loads)."""
        info = self.tensor(index)
        if not self.loaded or info.device != -1:
            raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", "not loaded into host memory")
        return ctypes.string_at(info.address, info.nbytes) if info.nbytes else b""

    def dlpack(self, index):
        """A DLManagedTensor* (1-D uint8 over the tensor's bytes) holding a
        reference on its memory; see include/gdunlock/safetensors.h."""
        self._require_open()
        index = self._index(index, len(self), "tensor")
        ptr = self._lib.gdu_st_model_dlpack(self._model, index)
        if not ptr:
            raise GdunlockError("GDU_ST_ERR_INVALID_ARGUMENT", "not loaded, or out of memory")
        return ptr
