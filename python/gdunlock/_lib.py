"""ctypes bindings of libgdunlock-load.so (include/gdunlock/safetensors.h and
the engine calls of include/gdunlock/io.h that the readers and benchmarks use).

Where the library comes from, first match wins: $GDUNLOCK_LOAD_LIB (the only
candidate when set); the one installed inside this package
(gdunlock/_native/lib/, built by `pip install .` or `pip install -e .`, see
native_path); $BUILD/lib; the build/
folder of the source tree this package sits in; sys.prefix/lib
(`cmake --install build --prefix PREFIX` into the environment); the dynamic
loader's search path. The name is the SONAME, libgdunlock-load.so.0."""
import ctypes
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_NAME = "libgdunlock-load.so.0"


class GdunlockError(RuntimeError):
    """A loader error: code is the status name (e.g. "GDU_ST_ERR_OVERLAP")."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def native_path(*parts):
    """The path of a file the package's build installed under gdunlock/_native/
    (the command, the shim, this library). An editable install
    (`pip install -e .`) runs the modules from the source tree while the build
    installs _native/ into site-packages: the package's __path__ names both,
    so the first folder of it that holds the file wins; the one beside this
    module when none does (for the message of a missing file)."""
    package = sys.modules[__package__]
    for folder in getattr(package, "__path__", [_HERE]):
        path = os.path.join(folder, "_native", *parts)
        if os.path.exists(path):
            return path
    return os.path.join(_HERE, "_native", *parts)


def _candidates():
    env = os.environ.get("GDUNLOCK_LOAD_LIB")
    if env:  # named explicitly: the only candidate
        yield env
        return
    yield native_path("lib", LIBRARY_NAME)
    build = os.environ.get("BUILD")
    if build:
        yield os.path.join(build, "lib", LIBRARY_NAME)
    root = os.path.dirname(os.path.dirname(_HERE))
    yield os.path.join(root, "build", "lib", LIBRARY_NAME)
    yield os.path.join(sys.prefix, "lib", LIBRARY_NAME)
    yield LIBRARY_NAME  # the dynamic loader's search path


def _open_library():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (missing)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise GdunlockError("GDU_ST_ERR_NO_LIBRARY",
                        f"{LIBRARY_NAME} not found; install the package (pip install .), build "
                        f"it (cmake --build build) or set GDUNLOCK_LOAD_LIB. Tried: "
                        + "; ".join(tried))


class StError(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512)]


class StTensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("name_len", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("ndim", ctypes.c_uint32),
                ("shape", ctypes.POINTER(ctypes.c_uint64)), ("nbytes", ctypes.c_uint64),
                ("address", ctypes.c_uint64), ("device", ctypes.c_int32),
                ("file", ctypes.c_uint32), ("file_offset", ctypes.c_uint64)]


class StLoadOptions(ctypes.Structure):
    _fields_ = [("target", ctypes.c_int), ("gpus", ctypes.POINTER(ctypes.c_int)),
                ("gpu_count", ctypes.c_size_t), ("progress", ctypes.c_void_p),
                ("progress_ctx", ctypes.c_void_p)]


class StLoadStats(ctypes.Structure):
    _fields_ = [("files", ctypes.c_uint64), ("tensors", ctypes.c_uint64),
                ("tensor_bytes", ctypes.c_uint64), ("read_bytes", ctypes.c_uint64),
                ("seconds", ctypes.c_double), ("backend", ctypes.c_char * 32),
                ("reason", ctypes.c_char * 256), ("memory", ctypes.c_char * 64),
                ("alloc_seconds", ctypes.c_double), ("engine_seconds", ctypes.c_double),
                ("transfer_seconds", ctypes.c_double)]


class IoExtent(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint64), ("length", ctypes.c_uint64),
                ("mem", ctypes.c_void_p), ("done", ctypes.c_uint64), ("status", ctypes.c_int)]


class IoOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("direct", ctypes.c_int), ("device", ctypes.c_int),
                ("workers", ctypes.c_uint), ("chunk_size", ctypes.c_size_t),
                ("staging_per_worker", ctypes.c_uint)]


TARGET_GPU, TARGET_HOST = 0, 1
IO_BACKEND_HOST = 3
IO_READ = 1
IO_OP_READ = 0
LENIENT = 1
FOLDER = 2

# Checked against the library's gdu_st_abi_layout() when it loads: each
# mirror field by field (name, offset, size), each constant by value.
MIRRORS = {"gdu_st_error": StError, "gdu_st_tensor": StTensor,
           "gdu_st_load_options": StLoadOptions, "gdu_st_load_stats": StLoadStats,
           "gdu_io_extent": IoExtent, "gdu_io_options": IoOptions}
CONSTANTS = {"GDU_ST_TARGET_GPU": TARGET_GPU, "GDU_ST_TARGET_HOST": TARGET_HOST,
             "GDU_ST_LENIENT": LENIENT, "GDU_IO_BACKEND_HOST": IO_BACKEND_HOST,
             "GDU_IO_READ": IO_READ, "GDU_IO_OP_READ": IO_OP_READ, "GDU_ST_FOLDER": FOLDER}
# GdunlockError codes that only this module raises; every other code is a
# status name of the library (gdu_st_status_name).
MODULE_CODES = {
    "GDU_ST_ERR_NO_LIBRARY": "libgdunlock-load.so cannot be found or loaded",
    "GDU_ST_ERR_ABI": "the library does not match this module",
    "GDU_ST_ERR_SLICE": "a slice that safetensors' get_slice would refuse",
    "GDU_ST_ERR_NO_SAFETENSORS": "patch() needs the safetensors package",
    "GDU_ST_ERR_NO_TORCH": "tensors need torch",
    "GDU_ST_ERR_FRAMEWORK": "a framework gdunlock does not serve (it serves pt and np)",
    "GDU_ST_ERR_NOT_FOUND": "safe_open has no tensor of that name",
}


def _signatures():
    """{name: (return type, argument types)} of the library's calls made here."""
    p, i, u64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_size_t
    err = ctypes.POINTER(StError)
    return {
        "gdu_st_status_name": (ctypes.c_char_p, [i]),
        "gdu_st_dtype_name": (ctypes.c_char_p, [i]),
        "gdu_st_dtype_bits": (ctypes.c_uint, [i]),
        "gdu_st_dtype_from_name": (i, [ctypes.c_char_p, ctypes.POINTER(i)]),
        "gdu_st_open_flags": (i, [ctypes.c_char_p, ctypes.c_uint, ctypes.POINTER(p), err]),
        "gdu_st_load": (i, [p, ctypes.POINTER(StLoadOptions), err]),
        "gdu_st_load_start": (i, [p, ctypes.POINTER(StLoadOptions), err]),
        "gdu_st_load_finish": (i, [p, err]),
        "gdu_st_engines_release": (i, [err]),
        "gdu_st_engine_acquire": (i, [i, i, ctypes.POINTER(p), err]),
        "gdu_st_engine_return": (i, [p]),
        "gdu_st_version": (ctypes.c_char_p, []),
        "gdu_st_verify": (i, [p, err]),
        "gdu_st_model_free": (None, [p]),
        "gdu_st_model_tensor_count": (sz, [p]),
        "gdu_st_model_tensor": (ctypes.POINTER(StTensor), [p, sz]),
        "gdu_st_model_file_count": (sz, [p]),
        "gdu_st_model_file_path": (ctypes.c_char_p, [p, sz]),
        "gdu_st_model_file_header": (p, [p, sz]),
        "gdu_st_model_file_open": (i, [p, sz, p, ctypes.POINTER(p), err]),
        "gdu_st_model_stats": (StLoadStats, [p]),
        "gdu_st_model_dlpack": (p, [p, sz]),
        "gdu_st_abi_layout": (ctypes.c_char_p, []),
        "gdu_st_header_metadata_count": (sz, [p]),
        "gdu_st_header_tensor_count": (sz, [p]),
        "gdu_st_header_has_metadata": (i, [p]),
        "gdu_st_header_metadata": (i, [p, sz, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(sz),
                                       ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(sz)]),
        "gdu_st_header_data_offset": (u64, [p]),
        "gdu_st_header_data_span": (u64, [p]),
        "gdu_io_options_default": (i, [ctypes.POINTER(IoOptions), ctypes.c_char_p, sz]),
        "gdu_io_defaults_set": (i, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, sz]),
        "gdu_io_backend_name": (ctypes.c_char_p, [i]),
        "gdu_io_engine_create": (i, [ctypes.POINTER(IoOptions), ctypes.POINTER(p),
                                     ctypes.c_char_p, sz]),
        "gdu_io_engine_destroy": (None, [p]),
        "gdu_io_engine_prestage": (i, [p, ctypes.c_char_p, sz]),
        "gdu_io_open": (i, [p, ctypes.c_char_p, i, ctypes.POINTER(p), ctypes.c_char_p, sz]),
        "gdu_io_close": (None, [p]),
        "gdu_io_file_reason": (ctypes.c_char_p, [p]),
        "gdu_io_read": (i, [p, u64, u64, p, ctypes.POINTER(u64), ctypes.c_char_p, sz]),
        "gdu_io_submit": (i, [p, i, ctypes.POINTER(IoExtent), sz, p, p, ctypes.POINTER(p)]),
        "gdu_io_extents_box": (i, [ctypes.POINTER(IoExtent), sz, u64,
                                   ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                                   ctypes.c_uint, u64, p]),
        "gdu_io_submit_box": (i, [p, i, u64, ctypes.POINTER(ctypes.c_uint64),
                                  ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint, u64, p, p, p,
                                  ctypes.POINTER(p)]),
        "gdu_io_submit_box_deferred": (i, [p, u64, ctypes.POINTER(ctypes.c_uint64),
                                           ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint, u64,
                                           p, p, ctypes.POINTER(p)]),
        "gdu_io_place": (i, [p, p]),
        "gdu_io_wait": (i, [p, ctypes.POINTER(u64), ctypes.c_char_p, sz]),
        "gdu_io_file_backend": (i, [p]),
    }


def _declare(lib):
    """lib with the signatures of its calls declared, once checked to be
    the library this module mirrors (its layout and version)."""
    for name, (restype, argtypes) in _signatures().items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise GdunlockError("GDU_ST_ERR_ABI", f"{lib._name} lacks {name}: it is older than "
                                f"this module; rebuild it") from None
        fn.restype = restype
        fn.argtypes = argtypes
    problems = layout_problems(lib.gdu_st_abi_layout())
    if problems:
        raise GdunlockError("GDU_ST_ERR_ABI", f"{lib._name} was built from other headers than "
                            f"this module mirrors: " + "; ".join(problems) +
                            " (rebuild the library or update python/gdunlock)")
    from ._version import __version__
    if lib.gdu_st_version().decode() != __version__:
        raise GdunlockError("GDU_ST_ERR_ABI", f"{lib._name} is version "
                            f"{lib.gdu_st_version().decode()}, this module {__version__}: "
                            f"rebuild or reinstall one of them")
    return lib


def layout_problems(layout_json):
    """What differs between the mirrors and the library's layout (a list)."""
    if not layout_json:
        return ["the library gave no layout (out of memory)"]
    layout = json.loads(layout_json)
    problems = []
    for cname, mirror in MIRRORS.items():
        c = layout["structs"].get(cname)
        if c is None:
            problems.append(f"the library describes no {cname}")
            continue
        ours = [(name, getattr(mirror, name).offset, getattr(mirror, name).size)
                for name, _ in mirror._fields_]
        theirs = [tuple(f) for f in c["fields"]]
        if ours != theirs:
            diff = next((f"{o} here, {t} there" for o, t in zip(ours, theirs) if o != t),
                        f"{len(ours)} fields here, {len(theirs)} there")
            problems.append(f"{cname} fields (name, offset, size) differ: {diff}")
        if ctypes.sizeof(mirror) != c["size"]:
            problems.append(f"sizeof {cname} {ctypes.sizeof(mirror)} here, {c['size']} there")
    for name, value in CONSTANTS.items():
        if layout["constants"].get(name) != value:
            problems.append(f"{name} is {value} here, {layout['constants'].get(name)} there")
    clash = sorted(set(MODULE_CODES) & set(layout["statuses"]))
    if clash:
        problems.append(f"codes both the module's and the library's: {clash}")
    return problems


_lib = None


def lib():
    """The loaded library (opened on first use)."""
    global _lib
    if _lib is None:
        _lib = _declare(_open_library())
    return _lib


# What a Python caller passes to get past a status (the CLI has its own).
_FIXES = {
    "GDU_ST_ERR_NO_CUDA": "gdunlock's loaders read into the first GPU unless told "
                          "(device='cuda:0'): pass device='cpu' to load into host memory, or "
                          "device='cuda:N' for a GPU that exists",
}


def check(status, err):
    """Raises GdunlockError for a failed call, with the fix where one is
    known."""
    if status != 0:
        name = lib().gdu_st_status_name(status).decode()
        message = err.message.decode(errors="replace")
        if name in _FIXES:
            message += f"; {_FIXES[name]}"
        raise GdunlockError(name, message)


def check_regular_file(path):
    """Raises GdunlockError unless path is a regular file: the engine's open
    would block forever on a FIFO without a writer (os.stat does not)."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise GdunlockError("GDU_ST_ERR_OPEN", f"{path}: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        raise GdunlockError("GDU_ST_ERR_OPEN", f"{path}: not a regular file")


def library_path():
    """The path of the library in use (opened on first use)."""
    return lib()._name
