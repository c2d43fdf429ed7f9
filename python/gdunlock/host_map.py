"""Tensors of a checkpoint opened for the CPU, as views of each file's
private mapping: what safetensors' safe_open does on the CPU (it maps the
file with torch.UntypedStorage.from_file(shared=False)), so that a tensor
costs memory only where it is touched, and the page cache holds the bytes
once. Copy-on-write (MAP_PRIVATE): a caller that writes into a tensor
changes its own copy of those pages, never the file.

numpy arrays are copied out of the mapping, as safetensors copies them
(each its own writable buffer). The dtypes numpy is asked for are
safetensors' own choices: bfloat16 by name (numpy knows it once ml_dtypes
is imported), the float8 and float4 types as numpy attributes (none in
plain numpy: AttributeError, as safetensors raises)."""
import mmap
import os

from ._lib import lib
from .errors import SafetensorError
from .reader import SliceError, SliceStepError, plan_read

_ELEMENT_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
                  "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
                  "I32": 4, "U32": 4, "F32": 4, "C64": 8, "F64": 8, "I64": 8, "U64": 8}
# safetensors' numpy dtype of each safetensors dtype: an attribute of numpy,
# or a name for numpy.dtype()
_NUMPY_ATTRS = {"F64": "float64", "F32": "float32", "F16": "float16", "U64": "uint64",
                "I64": "int64", "U32": "uint32", "I32": "int32", "U16": "uint16",
                "I16": "int16", "U8": "uint8", "I8": "int8", "C64": "complex64",
                "F8_E4M3": "float8_e4m3fn", "F8_E4M3FNUZ": "float8_e4m3fnuz",
                "F8_E5M2": "float8_e5m2", "F8_E5M2FNUZ": "float8_e5m2fnuz",
                "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2"}


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


class HostMap:
    """The files of an open Checkpoint mapped on first use, and its tensors
    as torch tensors or numpy arrays out of them."""

    def __init__(self, checkpoint):
        self._ckpt = checkpoint
        self._maps = {}  # file index -> mmap.mmap
        self._bases = {}  # file index -> 1-D uint8 torch tensor over the mapping

    def _map(self, file):
        """The mapping of file (an index of the checkpoint), made once. The
        path is opened again, as safetensors opens it: a file replaced since
        its header was validated is refused unless its header length and
        size still fit the validated header."""
        m = self._maps.get(file)
        if m is not None:
            return m
        ckpt = self._ckpt
        path = ckpt.files[file]
        header = lib().gdu_st_model_file_header(ckpt._model, file)
        start = lib().gdu_st_header_data_offset(header)
        end = start + lib().gdu_st_header_data_span(header)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        if size < end or int.from_bytes(m[:8], "little") != start - 8:
            m.close()
            raise SafetensorError("GDU_ST_ERR_CHANGED", f"{path} changed since it was opened "
                                  f"(its header length or size differ): open it again")
        self._maps[file] = m
        return m

    def _base(self, file):
        base = self._bases.get(file)
        if base is None:
            import torch
            base = self._bases[file] = torch.frombuffer(self._map(file), dtype=torch.uint8)
        return base

    def tensor(self, info):
        """Tensor info as a torch tensor viewing the mapping (its bytes
        copied only where the file placed it off its element size, which
        torch cannot view)."""
        from .torch_bridge import typed_view
        raw = self._base(info.file)[info.file_offset:info.file_offset + info.nbytes]
        if info.file_offset % _ELEMENT_BYTES.get(info.dtype, 1):
            raw = raw.clone()
        return typed_view(raw, info.dtype, info.shape)

    def can_slice(self, info):
        """Whether tensor info's slices are views of its torch tensor: a
        dtype of whole bytes torch has (the others are cut in bytes by the
        engine's planning)."""
        from .torch_bridge import torch_dtype
        return info.dtype in _ELEMENT_BYTES and torch_dtype(info.dtype) is not None

    def slice(self, info, index):
        """tensor info[index] as torch indexes it: a view of the mapping
        for a basic index. An index out of range is a SliceError (an
        IndexError), a step <= 0 a SliceStepError (a ValueError)."""
        whole = self.tensor(info)
        try:
            return whole[index]
        except IndexError as e:
            raise SliceError(str(e)) from None
        except ValueError as e:
            if "step" in str(e):
                raise SliceStepError(str(e)) from None
            raise

    def array(self, info, index=None):
        """Tensor info (or info[index], a basic index) as a numpy array of
        its own, copied out of the mapping."""
        import numpy as np
        dtype = numpy_dtype(np, info.dtype)
        shape = tuple(info.shape)
        if index is None:
            if info.nbytes == 0:
                return np.zeros(shape, dtype=dtype)
            m = self._map(info.file)
            with memoryview(m) as view, view[info.file_offset:info.file_offset + info.nbytes] as b:
                return np.frombuffer(bytearray(b), dtype=dtype).reshape(shape)
        try:  # the index rules of gdunlock's torch slices: no step <= 0, ints in range
            plan_read(list(shape), 8 * _ELEMENT_BYTES[info.dtype], index)
        except TypeError:  # advanced indexing: numpy's own
            pass
        count = 1
        for n in shape:
            count *= n
        whole = np.frombuffer(self._map(info.file), dtype=dtype, count=count,
                              offset=info.file_offset).reshape(shape)
        try:
            return whole[index].copy()
        except IndexError as e:
            raise SliceError(str(e)) from None

    def close(self):
        """Drops the mappings: each is unmapped once no tensor views it."""
        self._maps, self._bases = {}, {}
