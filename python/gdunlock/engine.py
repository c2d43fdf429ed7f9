"""The I/O engine's raw read, for measuring the loader against it: the same
bytes into memory the caller owns (a device pointer, or host memory with
backend "host")."""
import ctypes
import time

from ._lib import IO_BACKEND_HOST, IO_READ, GdunlockError, IoOptions, lib


def read_into(path, offset, length, address, device=0, host=False):
    """Creates an engine (GDUNLOCK_IO_* applied), reads file bytes
    [offset, offset+length) to address, and returns (seconds, reason). The
    time covers engine creation, open and the read, as a load's does."""
    L = lib()
    why = ctypes.create_string_buffer(512)
    opts = IoOptions()
    L.gdu_io_options_default(ctypes.byref(opts))
    opts.device = device
    if host:
        opts.backend = IO_BACKEND_HOST
    if L.gdu_io_options_from_env(ctypes.byref(opts), why, len(why)) != 0:
        raise GdunlockError("GDU_IO_EINVAL", why.value.decode())
    engine, f = ctypes.c_void_p(), ctypes.c_void_p()
    done = ctypes.c_uint64()
    t0 = time.perf_counter()
    rc = L.gdu_io_engine_create(ctypes.byref(opts), ctypes.byref(engine), why, len(why))
    if rc != 0:
        raise GdunlockError(f"engine error {rc}", why.value.decode())
    try:
        rc = L.gdu_io_open(engine, str(path).encode(), IO_READ, ctypes.byref(f), why, len(why))
        if rc != 0:
            raise GdunlockError(f"engine error {rc}", why.value.decode())
        reason = L.gdu_io_file_reason(f).decode(errors="replace")
        rc = L.gdu_io_read(f, offset, length, ctypes.c_void_p(address), ctypes.byref(done), why,
                           len(why))
        L.gdu_io_close(f)
        seconds = time.perf_counter() - t0
    finally:
        L.gdu_io_engine_destroy(engine)
    if rc != 0 or done.value != length:
        raise GdunlockError(f"engine error {rc}", f"read {done.value} of {length}: "
                            f"{why.value.decode()}")
    return seconds, reason
