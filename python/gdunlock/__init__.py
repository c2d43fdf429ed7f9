"""gdunlock: safetensors checkpoints into GPU memory through the gdunlock I/O
engine, from Python (ctypes over libgdunlock-load.so; no compiled extension).

    import gdunlock
    tensors = gdunlock.load_safetensors("model.safetensors", device=0)
    tensors = gdunlock.load_safetensors("model.safetensors.index.json", device=[0, 1])

    with gdunlock.safe_open("model.safetensors", framework="pt", device=0) as f:
        w = f.get_tensor("lm_head.weight")
        shard = f.get_slice("embed.weight")[rank * n:(rank + 1) * n]

    for name, tensor in gdunlock.weights_iterator(files, device=0, rank=r, world_size=w):
        ...

    gdunlock.patch()   # safetensors.safe_open / load_file (and transformers) through gdunlock
    gdunlock.prepare(0)  # the engine started in the background, before the model is built

`import gdunlock` needs only the Python standard library and the shared
library (see _lib.py for where it is looked for); tensors need torch.
"""

from ._lib import GdunlockError, library_path
from ._version import __version__
from . import defaults
from .checkpoint import Checkpoint, TensorInfo, parse_device
from .errors import SafetensorError
from .iterator import weights_iterator
from .kept_engines import Preparation, prepare, release_engines
from .patching import patch, unpatch
from .slicing import SliceError
from .safe_open import safe_open


def _load_native():
    """The library opened and checked now, as importing an extension module
    would, rather than inside the first load's clock (where it weighed on a
    first rank's time); when torch is already imported, its
    bridge too, and the GPU's engine set to start with CUDA
    (kept_engines.start_with_cuda). A library that cannot be had is not an
    error here: the first call that needs it raises, naming what was
    tried."""
    import sys

    from ._lib import lib
    try:
        lib()
    except GdunlockError:
        return
    if "torch" in sys.modules:
        from . import kept_engines, torch_bridge  # noqa: F401
        kept_engines.start_with_cuda(sys.modules["torch"])


_load_native()

__all__ = ["Checkpoint", "GdunlockError", "Preparation", "SafetensorError", "SliceError",
           "TensorInfo", "__version__", "defaults", "library_path", "load_file",
           "load_safetensors", "parse_device", "patch", "prepare", "release_engines", "safe_open",
           "unpatch", "weights_iterator"]


def load_safetensors(path, device="cuda:0", verify=False, lenient=False):
    """Loads a .safetensors file, a sharded checkpoint's index JSON or a
    model's folder (its index, else its .safetensors files) and returns
    {name: torch.Tensor} on device: the first GPU unless told ("cuda:N" or
    N, a list of GPUs, or "cpu" for host memory). All tensors of one file
    share its memory (a few allocations of whole tensors), freed when the
    last of them dies."""
    from .torch_bridge import aligned, tensor_view

    with Checkpoint(path, lenient=lenient, folder=True) as ckpt:
        ckpt.load_start(device)
        try:  # the tensor objects are made while the bytes move
            views = [(info, tensor_view(ckpt, i, info)) for i, info in enumerate(ckpt.tensors())]
        finally:
            ckpt.load_finish()
        if verify:
            ckpt.verify()
        return {info.name: aligned(view, info) for info, view in views}


def load_file(filename, device="cpu", *, backend=None):
    """safetensors.torch.load_file's signature: {name: tensor} of one file,
    in file order. On a GPU each tensor is its own allocation, read in
    batches through the engine; on the CPU each is a view of the file's
    mapping (backend="pread": its own memory, read through the engine)."""
    with safe_open(filename, framework="pt", device=device, backend=backend) as f:
        return f.get_tensors()
