"""gdunlock: safetensors checkpoints into GPU memory through the gdunlock I/O
engine, from Python (ctypes over build/lib/libgdunlock-load.so; no compiled
extension).

    import gdunlock
    tensors = gdunlock.load_safetensors("model.safetensors", device=0)
    tensors = gdunlock.load_safetensors("model.safetensors.index.json", device=[0, 1])
    tensors = gdunlock.load_safetensors("model.safetensors", device="cpu")

The library is found through $GDUNLOCK_LOAD_LIB, $BUILD/lib, or the build/
folder next to this package's repository.
"""
import ctypes

from ._lib import GdunlockError, library_path
from ._version import __version__
from .checkpoint import Checkpoint, TensorInfo, parse_device

__all__ = ["Checkpoint", "GdunlockError", "TensorInfo", "__version__", "library_path",
           "load_safetensors", "parse_device", "release_engines"]


def load_safetensors(path, device=0, verify=False, lenient=False):
    """Loads a .safetensors file or a sharded checkpoint's index JSON and
    returns {name: torch.Tensor}. All tensors of one file share its memory
    (a few allocations of whole tensors), freed when the last of them dies."""
    from .torch_bridge import to_torch

    with Checkpoint(path, lenient=lenient) as ckpt:
        ckpt.load(device)
        if verify:
            ckpt.verify()
        return {info.name: to_torch(ckpt, i, info) for i, info in enumerate(ckpt.tensors())}


def release_engines():
    """Frees the I/O engines the loads of this process keep (worker threads,
    pinned staging buffers); the next load creates them again. Raises
    GdunlockError (GDU_ST_ERR_BUSY) while a load runs."""
    from ._lib import StError, check, lib

    err = StError()
    check(lib().gdu_st_engines_release(ctypes.byref(err)), err)
