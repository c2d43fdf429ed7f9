"""Tensors of a checkpoint opened for the CPU, as views of each file's
private mapping: what safetensors' safe_open does on the CPU (it maps the
file with torch.UntypedStorage.from_file(shared=False)), so that a tensor
costs memory only where it is touched, and the page cache holds the bytes
once. Copy-on-write (MAP_PRIVATE): a caller that writes into a tensor
changes its own copy of those pages, never the file.

numpy arrays are copied out of the mapping, as safetensors copies them
(each its own writable buffer). The dtypes numpy is asked for are
safetensors' own choices: bfloat16 by name (plain numpy does not know it:
TypeError), the float8 and float4 types as numpy attributes (none in plain
numpy: AttributeError); safetensors raises the same.

The library validated each file through a descriptor of its own, which a
mapping cannot use: the file is mapped by its path, and only while the path
still names the file as it was when safe_open opened it (device, inode,
size, modification and change time, and a header length that fits). Where it does not
(the file replaced, changed or removed since) or the file cannot be mapped,
its tensors come through the engine from the validated descriptor, as
every tensor of a GPU does; safetensors, which maps at the open, also
keeps giving the file as it was."""
import mmap
import os

from ._lib import lib
from .errors import SafetensorError
from .shards_ahead import file_identity
from .slicing import SliceError, SliceStepError, plan_read

# safetensors' numpy dtype of each safetensors dtype: an attribute of numpy,
# or a name for numpy.dtype()
_NUMPY_ATTRS = {"F64": "float64", "F32": "float32", "F16": "float16", "U64": "uint64",
                "I64": "int64", "U32": "uint32", "I32": "int32", "U16": "uint16",
                "I16": "int16", "U8": "uint8", "I8": "int8", "C64": "complex64",
                "F8_E4M3": "float8_e4m3fn", "F8_E4M3FNUZ": "float8_e4m3fnuz",
                "F8_E5M2": "float8_e5m2", "F8_E5M2FNUZ": "float8_e5m2fnuz",
                "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2"}


def _whole_bytes(info):
    """Bytes per element of tensor info, from C's dtype table (info.bits);
    0 for a dtype whose elements are not whole bytes (F4, F6_*)."""
    return info.bits // 8 if info.bits % 8 == 0 else 0


def numpy_dtype(np, name):
    """The numpy dtype safetensors gives a tensor of dtype name."""
    if name == "BF16":
        return np.dtype("bfloat16")
    if name == "BOOL":
        return bool
    attr = _NUMPY_ATTRS.get(name)
    if attr is None:
        raise SafetensorError("GDU_ST_ERR_DTYPE", f"Dtype not understood: {name}")
    return getattr(np, attr)


def _identity(path):
    """path's file_identity, or None when it cannot be had."""
    try:
        return file_identity(os.stat(path))
    except OSError:
        return None


class HostMap:
    """The files of an open Checkpoint mapped on first use, and its tensors
    as torch tensors or numpy arrays out of them."""

    def __init__(self, checkpoint):
        self._ckpt = checkpoint
        # the files' paths, made once (each is a library call: making them
        # for every file mapped cost an index of N shards N * N), and each
        # file as its path names it now, just after the library opened it
        self._paths = checkpoint.files
        self._identities = [_identity(path) for path in self._paths]
        self._maps = {}  # file index -> mmap.mmap, None where it is not mapped
        self._bases = {}  # file index -> 1-D uint8 torch tensor over the mapping

    def _map(self, file):
        """The mapping of file (an index of the checkpoint), made once; None
        where the path no longer names the file opened or it cannot be
        mapped (module docstring)."""
        if file in self._maps:
            return self._maps[file]
        ckpt, m = self._ckpt, None
        header = lib().gdu_st_model_file_header(ckpt._model, file)
        start = lib().gdu_st_header_data_offset(header)
        try:
            with open(self._paths[file], "rb") as f:
                st = os.fstat(f.fileno())
                if file_identity(st) == self._identities[file] and \
                        st.st_size >= start + lib().gdu_st_header_data_span(header):
                    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except OSError:  # removed, unreadable now, or a file system that cannot map it
            m = None
        if m is not None and int.from_bytes(m[:8], "little") != start - 8:
            m.close()
            m = None
        self._maps[file] = m
        return m

    def _base(self, file):
        base = self._bases.get(file)
        if base is None:
            m = self._map(file)
            if m is None:
                return None
            import torch
            base = self._bases[file] = torch.frombuffer(m, dtype=torch.uint8)
        return base

    def tensor(self, info):
        """Tensor info as a torch tensor viewing the mapping (its bytes
        copied only where the file placed it off its element size, which
        torch cannot view); None where the file is not mapped."""
        from .torch_bridge import typed_view
        base = self._base(info.file)
        if base is None:
            return None
        raw = base[info.file_offset:info.file_offset + info.nbytes]
        if info.file_offset % (_whole_bytes(info) or 1):
            raw = raw.clone()
        return typed_view(raw, info.dtype, info.shape)

    def can_slice(self, info):
        """Whether tensor info's slices are views of its torch tensor: a
        dtype of whole bytes torch has (the others are cut in bytes by the
        engine's planning)."""
        from .torch_bridge import torch_dtype
        return _whole_bytes(info) > 0 and torch_dtype(info.dtype) is not None

    def slice(self, info, index):
        """tensor info[index] as torch indexes it: a view of the mapping
        for a basic index (None where the file is not mapped). An index out
        of range is a SliceError (an IndexError), a step <= 0 a
        SliceStepError (a ValueError)."""
        whole = self.tensor(info)
        if whole is None:
            return None
        try:
            return whole[index]
        except IndexError as e:
            raise SliceError(str(e)) from None
        except ValueError as e:
            if "step" in str(e):
                raise SliceStepError(str(e)) from None
            raise

    def array(self, info, index=None, data=None):
        """Tensor info (or info[index], a basic index) as a numpy array of
        its own, copied out of the mapping, or out of data (the tensor's
        bytes, a buffer) when given; None where neither is there."""
        import numpy as np
        dtype = numpy_dtype(np, info.dtype)
        shape = tuple(info.shape)
        if data is None:
            data, at = self._map(info.file), info.file_offset
            if data is None:
                return None
        else:
            at = 0
        if index is None:
            if info.nbytes == 0:
                return np.zeros(shape, dtype=dtype)
            with memoryview(data) as view, view.cast("B")[at:at + info.nbytes] as b:
                return np.frombuffer(bytearray(b), dtype=dtype).reshape(shape)
        try:  # the index rules of gdunlock's torch slices: no step <= 0, ints in range
            plan_read(list(shape), info.bits, index)
        except TypeError:  # advanced indexing: numpy's own
            pass
        count = 1
        for n in shape:
            count *= n
        whole = np.frombuffer(data, dtype=dtype, count=count, offset=at).reshape(shape)
        try:
            return whole[index].copy()
        except IndexError as e:
            raise SliceError(str(e)) from None

    def close(self):
        """Drops the mappings: each is unmapped once no tensor views it."""
        self._maps, self._bases = {}, {}
