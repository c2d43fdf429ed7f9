"""patch(): safetensors' safe_open and torch load_file through gdunlock, in
safetensors itself and in every module that imported them by name
(transformers: `from safetensors import safe_open`), so that
AutoModel.from_pretrained(folder) loads through the engine unchanged.

What gdunlock does not serve goes to safetensors' own function, unchanged:
other frameworks (numpy, flax, tf...), devices other than cpu and cuda,
options gdunlock does not have. Errors keep safetensors' types: a missing
file raises an error that is a FileNotFoundError, a bad header one that is
a SafetensorError, each also a GdunlockError with its code.

transformers 5 opens every shard with device="cpu" and moves each
parameter to the device its device_map names (core_model_loading's
_materialize_copy). While patched, a parameter bound for a GPU is read
straight into that GPU's memory instead, and cast there when transformers
asks for another dtype: no pageable copy on the host, no second copy."""
import sys
import threading

from . import kept_engines
from ._lib import GdunlockError
from .errors import SafetensorError, as_safetensors_error

_saved = []  # (module, attribute, original)
_dropins = {}  # id(drop-in) -> (drop-in, original), for modules that bound one while patched
_OPTIONS = {"backend"}  # safetensors' safe_open options gdunlock accepts (and reads its own way)
_FRAMEWORKS = ("pt", "torch", "pytorch")
_BACKENDS = ("mmap", "pread")
fallbacks = []  # why calls went to safetensors' own function
_served = {"tensors": 0, "bytes": 0}  # parameters read straight to their GPU
_lock = threading.Lock()


def stats():
    """Parameters patch() read straight into the GPU transformers placed
    them on, and their bytes, since the process started."""
    with _lock:
        return dict(_served)


def _gpu(device):
    """device as one gdunlock serves: a GPU (ordinal, "cuda[:N]",
    torch.device) or the host ("cpu", None); else None."""
    if device is None:
        return "cpu"
    kind = getattr(device, "type", None)
    if kind is not None:  # torch.device
        return device if kind in ("cuda", "cpu") else None
    if isinstance(device, int) and not isinstance(device, bool):
        return device if device >= 0 else None
    if device in ("cpu", "cuda") or (isinstance(device, str) and device.startswith("cuda:")
                                      and device[5:].isdigit()):
        return device
    return None


def _safetensors_error(e):
    """A GdunlockError as safetensors would have raised it: safe_open's own
    translation (errors.py: a SafetensorError or the OS's error), and any
    other failure (the GPU, the engine) a SafetensorError too, as
    safetensors reports the failures of its own reads; each still a
    GdunlockError with its code."""
    if not isinstance(e, GdunlockError):
        return e
    out = as_safetensors_error(e)
    if out is e and not isinstance(e, (SafetensorError, OSError)):
        out = SafetensorError(e.code, e.message)
    return out


def _translating(fn):
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GdunlockError as e:
            raise _safetensors_error(e) from None
    return call


class PatchedFile:
    """What the patched safe_open returns for a file gdunlock serves:
    gdunlock's safe_open, every error of it of safetensors' types."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        return _translating(attr) if callable(attr) else attr

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._inner.close()


def _replacements():
    try:
        import safetensors
        import safetensors.torch
    except ImportError as e:
        raise GdunlockError("GDU_ST_ERR_NO_SAFETENSORS", f"patch() replaces safetensors' "
                            f"functions, and safetensors does not import: {e}") from None

    from . import safe_open
    original_open, original_load = safetensors.safe_open, safetensors.torch.load_file

    def why_not(framework, device, options):
        """Why safetensors' own function must answer, or None."""
        if set(options) - _OPTIONS:
            return sorted(set(options) - _OPTIONS)
        if framework not in _FRAMEWORKS:
            return f"framework {framework!r}"
        if _gpu(device) is None:
            return f"device {device!r}"
        if options.get("backend", "mmap") not in _BACKENDS:
            return f"backend {options['backend']!r}"  # safetensors refuses it as it does
        return None

    class _Meta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, (PatchedFile, safe_open, original_open))

    class safe_open_dropin(metaclass=_Meta):  # noqa: N801
        """gdunlock's safe_open, or safetensors' own where gdunlock does not
        serve the call (a drop-in never breaks a caller)."""

        def __new__(cls, filename, framework="pt", device="cpu", **options):
            hook_transformers()
            reason = why_not(framework, device, options)
            if reason is not None:
                fallbacks.append(reason)
                return original_open(filename, framework=framework, device=device, **options)
            try:
                return PatchedFile(safe_open(filename, framework=framework, device=_gpu(device),
                                             **options))
            except GdunlockError as e:
                raise _safetensors_error(e) from None

    def load_file_dropin(filename, device="cpu", **options):
        if options or _gpu(device) is None:
            fallbacks.append(sorted(options) or f"device {device!r}")
            return original_load(filename, device=device, **options)
        with safe_open_dropin(filename, framework="pt", device=device) as f:
            return f.get_tensors()

    return {id(original_open): (original_open, safe_open_dropin),
            id(original_load): (original_load, load_file_dropin)}


def _read_straight(original):
    """transformers' _materialize_copy(tensor, device, dtype), serving a
    gdunlock slice bound for a GPU from the file into that GPU."""
    from .safe_open import SafeSlice

    def materialize(tensor, device=None, dtype=None):
        if isinstance(tensor, SafeSlice) and device is not None and _gpu(device) is not None \
                and getattr(device, "type", device) != "cpu":
            try:
                out = tensor._owner.read_to(tensor._info.name, None, _gpu(device))
            except GdunlockError as e:
                raise _safetensors_error(e) from None
            with _lock:
                _served["tensors"] += 1
                _served["bytes"] += tensor._info.nbytes
            return out if dtype is None or out.dtype == dtype else out.to(dtype)
        return original(tensor, device, dtype)
    materialize.gdunlock_original = original
    return materialize


def hook_transformers():
    """While patched: wraps transformers 5's _materialize_copy (once
    transformers is imported) so that parameters bound for a GPU are read
    straight into it. A transformers without it (4.x) is left as it is."""
    module = sys.modules.get("transformers.core_model_loading")
    if not _saved or module is None:
        return
    with _lock:
        fn = getattr(module, "_materialize_copy", None)
        if fn is None or hasattr(fn, "gdunlock_original"):
            return
        module._materialize_copy = _read_straight(fn)
        _saved.append((module, "_materialize_copy", fn))


def patch():
    """Makes safetensors.safe_open and safetensors.torch.load_file (and the
    names other modules bound to them) gdunlock's, and has the GPU's engine
    start with CUDA (kept_engines.start_with_cuda). Idempotent; unpatch()
    restores the names. Returns the number of names replaced."""
    if _saved:
        return 0
    replace = _replacements()
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for attr, value in list(names.items()):
            hit = replace.get(id(value))
            if hit is not None and value is hit[0]:
                setattr(module, attr, hit[1])
                _saved.append((module, attr, value))
    for original, dropin in replace.values():
        _dropins[id(dropin)] = (dropin, original)
    n = len(_saved)
    hook_transformers()
    # safetensors.torch imported torch: the engine can start with CUDA
    # now, whichever of torch and gdunlock was imported first (no torch
    # only where safetensors.torch is a stand-in, as in the tests)
    torch = sys.modules.get("torch")
    if torch is not None:
        kept_engines.start_with_cuda(torch)
    return n


def unpatch():
    """Puts the originals back, in every module patch() or the patched
    functions changed."""
    with _lock:
        while _saved:
            module, attr, value = _saved.pop()
            setattr(module, attr, value)
        dropins = dict(_dropins)
        _dropins.clear()
    # Modules imported while patched bound the drop-ins by name too.
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for attr, value in list(names.items()):
            hit = dropins.get(id(value))
            if hit is not None and value is hit[0]:
                setattr(module, attr, hit[1])


class patched:  # noqa: N801
    """with gdunlock.patching.patched(): ... (patch, then unpatch; inside a
    patch() already made, it leaves that one in place)."""

    def __enter__(self):
        self._made = not _saved
        patch()
        return self

    def __exit__(self, *exc):
        if self._made:
            unpatch()
