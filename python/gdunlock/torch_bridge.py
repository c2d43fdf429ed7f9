"""Loaded tensors as torch.Tensor views through DLPack, zero-copy.

Each tensor is handed to torch as a 1-D uint8 DLPack tensor over its bytes
(whose deleter drops a reference on the file's memory block), then viewed as
its dtype and shape; every safetensors dtype torch has is reachable that way,
whatever torch's DLPack dtype support."""
import ctypes

import torch

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _Managed(ctypes.Structure):
    """DLManagedTensor, as far as needed to call its deleter."""
    _fields_ = [("dl_tensor", ctypes.c_byte * 48), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p))]


_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16",
    "BF16": "bfloat16", "F32": "float32", "F64": "float64", "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F4": "float4_e2m1fn_x2",
}


def torch_dtype(name):
    """The torch dtype for a safetensors dtype name, or None (F6_*, or one
    this torch lacks): such tensors come back as raw uint8 bytes."""
    attr = _DTYPES.get(name)
    return getattr(torch, attr, None) if attr else None


def _bytes_tensor(ptr):
    capsule = _capsule_new(ptr, b"dltensor", None)
    try:
        return torch.utils.dlpack.from_dlpack(capsule)
    except BaseException:
        if _capsule_is_valid(capsule, b"dltensor"):  # torch did not take ownership
            managed = _Managed.from_address(ptr)
            managed.deleter(ptr)
        raise


def typed_view(raw, dtype_name, shape):
    """A 1-D uint8 tensor of a tensor's bytes viewed as its dtype and shape;
    raw itself for a dtype torch lacks (F6_*, or one this torch is too old
    for), and for F4 whose last dimension is odd (torch packs two per byte)."""
    dtype = torch_dtype(dtype_name)
    shape = list(shape)
    if dtype_name == "F4":
        if not shape or shape[-1] % 2:
            return raw
        shape[-1] //= 2
    if dtype is None:
        return raw
    return raw.view(dtype).reshape(shape)


def tensor_view(checkpoint, index, info):
    """The tensor `index` of a started or loaded checkpoint as a torch.Tensor
    over its memory, no copy (its bytes are valid once the load finished)."""
    return typed_view(_bytes_tensor(checkpoint.dlpack(index)), info.dtype, info.shape)


def aligned(view, info):
    """view itself, or an aligned copy of it where the file placed the tensor
    off its element size (the reference writer never does; kernels may
    assume alignment). Only for a loaded view: the copy reads its bytes."""
    if info.address % view.element_size():
        return view.clone()
    return view


def to_torch(checkpoint, index, info):
    """The tensor `index` of a loaded checkpoint as a torch.Tensor."""
    return aligned(tensor_view(checkpoint, index, info), info)
