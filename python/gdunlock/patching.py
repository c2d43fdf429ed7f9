"""patch(): safetensors' safe_open and torch load_file through gdunlock, in
safetensors itself and in every module that imported them by name
(transformers: `from safetensors import safe_open`), so that
AutoModel.from_pretrained(folder) loads through the engine unchanged."""
import sys

_saved = []  # (module, attribute, original)
_OPTIONS = {"backend"}  # safetensors' safe_open options gdunlock accepts (and reads its own way)
fallbacks = []  # the options that sent a call to safetensors' own function


def _replacements():
    try:
        import safetensors
        import safetensors.torch
    except ImportError as e:
        from ._lib import GdunlockError
        raise GdunlockError("GDU_ST_ERR_NO_SAFETENSORS", f"patch() replaces safetensors' "
                            f"functions, and safetensors does not import: {e}") from None

    from . import load_file, safe_open
    original_open, original_load = safetensors.safe_open, safetensors.torch.load_file

    def safe_open_dropin(filename, framework="pt", device="cpu", **options):
        """gdunlock's safe_open, or safetensors' own where the caller asks for
        an option gdunlock does not have (a drop-in never breaks a caller)."""
        if set(options) - _OPTIONS:
            fallbacks.append(sorted(set(options) - _OPTIONS))
            return original_open(filename, framework=framework, device=device, **options)
        return safe_open(filename, framework=framework, device=device, **options)

    def load_file_dropin(filename, device="cpu", **options):
        if options:
            fallbacks.append(sorted(options))
            return original_load(filename, device=device, **options)
        return load_file(filename, device=device)

    return {id(original_open): (original_open, safe_open_dropin),
            id(original_load): (original_load, load_file_dropin)}


def patch():
    """Makes safetensors.safe_open and safetensors.torch.load_file (and the
    names other modules bound to them) gdunlock's. Idempotent; unpatch()
    restores them. Returns the number of names replaced."""
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
    return len(_saved)


def unpatch():
    """Puts the originals back."""
    while _saved:
        module, attr, value = _saved.pop()
        setattr(module, attr, value)


class patched:  # noqa: N801
    """with gdunlock.patching.patched(): ... (patch, then unpatch)."""

    def __enter__(self):
        patch()
        return self

    def __exit__(self, *exc):
        unpatch()
