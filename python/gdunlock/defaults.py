"""The I/O engine's settings at run time, as kvikio.defaults has them.

    gdunlock.defaults.get("workers")             # 12
    gdunlock.defaults.set("workers", 4)          # from now on
    gdunlock.defaults.set({"direct": True, "chunk": "16M"})
    with gdunlock.defaults.set(workers=4):       # inside the block only
        gdunlock.load_safetensors(path, device=0)

The settings are the GDUNLOCK_IO_* variables (docs/settings.md) under their
short names: backend, workers, chunk, staging, direct. The environment
gives the process's first values; set() changes them for every load after
it. The engines the loads keep were made with the old values: set() frees
them (release_engines), and raises GDU_ST_ERR_BUSY, changing nothing, while
a load, a safe_open or a weights_iterator is using one."""
import ctypes

from ._lib import GdunlockError, IoOptions, lib
from .bool_words import env_bool, parse_bool
from .kept_engines import release_engines

NAMES = ("backend", "workers", "chunk", "staging", "direct")
_DIRECT = {0: "auto", 1: "on", 2: "off"}


def get(name):
    """The current value of one setting: backend and direct as their names
    ("auto", "cufile", "pipeline"; "auto", "on", "off"), the others as
    integers (chunk in bytes)."""
    if name not in NAMES:
        raise KeyError(f"no setting named {name!r}: {', '.join(NAMES)}")
    o = IoOptions()
    lib().gdu_io_options_default(ctypes.byref(o), None, 0)
    if name == "backend":
        return lib().gdu_io_backend_name(o.backend).decode()
    if name == "direct":
        return _DIRECT[o.direct]
    return {"workers": o.workers, "chunk": o.chunk_size, "staging": o.staging_per_worker}[name]


def _text(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _set_one(name, value):
    why = ctypes.create_string_buffer(256)
    if lib().gdu_io_defaults_set(name.encode(), _text(value).encode(), why, len(why)) != 0:
        raise ValueError(why.value.decode(errors="replace"))


class set:  # noqa: N801 - kvikio's name: a call and a context manager
    """set(name, value), set({name: value, ...}) or set(name=value, ...):
    changes the settings for the loads that follow; as a `with` block, only
    inside it. All or nothing: an invalid value raises ValueError naming it,
    and nothing changes."""

    def __init__(self, *args, **kwargs):
        if len(args) == 2:
            config = {args[0]: args[1]}
        elif len(args) == 1 and isinstance(args[0], dict):
            config = dict(args[0])
        elif not args:
            config = {}
        else:
            raise TypeError("set(name, value), set({name: value}) or set(name=value)")
        config.update(kwargs)
        for name in config:
            if name not in NAMES:
                raise KeyError(f"no setting named {name!r}: {', '.join(NAMES)}")
        self._old = {name: get(name) for name in config}
        self._apply(config)

    def _apply(self, config):
        release_engines()
        done = []
        try:
            for name, value in config.items():
                _set_one(name, value)
                done.append(name)
        except (ValueError, GdunlockError):
            for name in done:
                _set_one(name, self._old[name])
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._apply(self._old)
        return False


__all__ = ["NAMES", "env_bool", "get", "parse_bool", "set"]
