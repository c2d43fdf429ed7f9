"""patch(): safetensors' safe_open and torch load_file through gdunlock, in
safetensors itself and in every module that imported them by name
(transformers: `from safetensors import safe_open`), so that
AutoModel.from_pretrained(folder) loads through the engine unchanged."""
import sys

_saved = []  # (module, attribute, original)


def _replacements():
    try:
        import safetensors
        import safetensors.torch
    except ImportError as e:
        from ._lib import GdunlockError
        raise GdunlockError("GDU_ST_ERR_NO_SAFETENSORS", f"patch() replaces safetensors' "
                            f"functions, and safetensors does not import: {e}") from None

    from . import load_file, safe_open
    return {id(safetensors.safe_open): (safetensors.safe_open, safe_open),
            id(safetensors.torch.load_file): (safetensors.torch.load_file, load_file)}


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
