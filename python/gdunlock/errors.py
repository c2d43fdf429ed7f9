"""The exception types safetensors' safe_open raises, for gdunlock's own
safe_open (patch() or not): code written against safetensors catches
gdunlock's errors with the same except clauses, and gdunlock's code still
finds GdunlockError and its code on each.

- SafetensorError: what the file or the call gets wrong (a bad header, a
  tensor the file lacks, a framework or device the call names wrongly, a
  closed file). It is also safetensors.SafetensorError where safetensors is
  installed (safetensors raises its own class for these).
- The OS's error where opening the file failed: FileNotFoundError,
  IsADirectoryError, PermissionError... (OSError's subclass for the errno),
  with errno, strerror and filename set as open() sets them. safetensors
  raises FileNotFoundError for every failed open and OSError for a folder;
  both are OSErrors, as these are."""
import errno
import os

from ._lib import GdunlockError

try:  # its class too, where it is installed (a few ms at import)
    from safetensors import SafetensorError as _SafetensorsOwn
except ImportError:
    _SafetensorsOwn = None

# Library and module codes that say the file or the call is wrong, not the
# machine: safetensors raises SafetensorError for each of them.
FORMAT_CODES = frozenset((
    "GDU_ST_ERR_TOO_SMALL", "GDU_ST_ERR_HEADER_LENGTH", "GDU_ST_ERR_HEADER_JSON",
    "GDU_ST_ERR_HEADER_NOT_OBJECT", "GDU_ST_ERR_TENSOR_ENTRY", "GDU_ST_ERR_DTYPE",
    "GDU_ST_ERR_SHAPE", "GDU_ST_ERR_OVERFLOW", "GDU_ST_ERR_OFFSETS", "GDU_ST_ERR_SIZE_MISMATCH",
    "GDU_ST_ERR_OUT_OF_RANGE", "GDU_ST_ERR_OVERLAP", "GDU_ST_ERR_METADATA", "GDU_ST_ERR_INDEX",
    "GDU_ST_ERR_PATH_ESCAPE", "GDU_ST_ERR_DUPLICATE_TENSOR", "GDU_ST_ERR_HOLE",
    "GDU_ST_ERR_TRAILING", "GDU_ST_ERR_CHANGED", "GDU_ST_ERR_NOT_FOUND",
    "GDU_ST_ERR_FRAMEWORK"))
# Codes of a failed open or read: the OS's error.
OS_CODES = frozenset(("GDU_ST_ERR_OPEN", "GDU_ST_ERR_IO", "GDU_ST_ERR_TOO_MANY_FILES"))


class SafetensorError(GdunlockError, *((_SafetensorsOwn,) if _SafetensorsOwn else ())):
    """A format or usage error, as safetensors.SafetensorError (which it
    also is, where safetensors is installed); code says which."""


class InvalidDeviceError(SafetensorError, ValueError):
    """A device safe_open cannot read into: safetensors' SafetensorError,
    and the ValueError gdunlock's device parsing raised before."""


_os_classes = {}  # OSError's subclass -> the one that is also a GdunlockError


def os_error(code, message, err, path):
    """An OSError of errno err's own subclass (FileNotFoundError for
    ENOENT...) that is also a GdunlockError with code and message."""
    base = type(OSError(err, ""))  # Python picks the subclass of the errno
    cls = _os_classes.get(base)
    if cls is None:
        cls = _os_classes[base] = type(f"Gdunlock{base.__name__}", (base, GdunlockError),
                                       {"__module__": __name__})
    out = cls(err, os.strerror(err), os.fspath(path) if path is not None else None)
    out.code, out.message = code, message
    return out


def _errno_of(code, message, path):
    """The errno the OS gave for a failed open or read: the one whose text
    ends the library's message ("PATH: No such file or directory"); a
    folder or special file the library refused as "not a regular file"
    gets EISDIR or EINVAL, as the path is now."""
    if code == "GDU_ST_ERR_TOO_MANY_FILES":
        return errno.EMFILE
    for err in errno.errorcode:
        if message.endswith(": " + os.strerror(err)):
            return err
    if message.endswith("not a regular file"):
        try:
            return errno.EISDIR if os.path.isdir(path) else errno.EINVAL
        except (TypeError, ValueError):
            return errno.EINVAL
    return errno.EIO


def as_safetensors_error(e, path=None):
    """GdunlockError e as safetensors raises that failure: a SafetensorError
    or an OSError (the path it concerns: path), each also a GdunlockError
    with e's code; e itself for a code of neither kind (the GPU, the
    engine, a missing library) or one translated already."""
    if isinstance(e, (SafetensorError, OSError)) or not isinstance(e, GdunlockError):
        return e
    if e.code in FORMAT_CODES:
        out = SafetensorError(e.code, e.message)
    elif e.code in OS_CODES:
        out = os_error(e.code, e.message, _errno_of(e.code, e.message, path), path)
    else:
        return e
    out.__traceback__ = e.__traceback__
    return out
