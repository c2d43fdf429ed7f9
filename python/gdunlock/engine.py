"""The I/O engine's raw read, for measuring the loader against it: the same
bytes into memory the caller owns (a device pointer, or host memory with
host=True), through one engine kept across reads as the loader keeps its own."""
import ctypes
import time

from ._lib import IO_BACKEND_HOST, IO_READ, GdunlockError, IoOptions, check_regular_file, lib


class Engine:
    """An engine for GPU `device` (or host memory), GDUNLOCK_IO_* as its defaults."""

    def __init__(self, device=0, host=False):
        self._lib = lib()
        self._engine = ctypes.c_void_p()
        why = ctypes.create_string_buffer(512)
        opts = IoOptions()
        if self._lib.gdu_io_options_default(ctypes.byref(opts), why, len(why)) != 0:
            raise GdunlockError("GDU_ST_ERR_SETTINGS", why.value.decode())
        opts.device = device
        if host:
            opts.backend = IO_BACKEND_HOST
        rc = self._lib.gdu_io_engine_create(ctypes.byref(opts), ctypes.byref(self._engine), why,
                                            len(why))
        if rc != 0:
            raise GdunlockError("GDU_ST_ERR_ENGINE", f"{why.value.decode()} (errno {-rc})")

    def close(self):
        if self._engine:
            self._lib.gdu_io_engine_destroy(self._engine)
            self._engine = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self, path, offset, length, address):
        """Reads file bytes [offset, offset+length) to address; returns
        (seconds for open + read, the file's path reason)."""
        check_regular_file(str(path))
        why = ctypes.create_string_buffer(512)
        f, done = ctypes.c_void_p(), ctypes.c_uint64()
        t0 = time.perf_counter()
        rc = self._lib.gdu_io_open(self._engine, str(path).encode(), IO_READ, ctypes.byref(f),
                                   why, len(why))
        if rc != 0:
            raise GdunlockError("GDU_ST_ERR_ENGINE", f"{why.value.decode()} (errno {-rc})")
        reason = self._lib.gdu_io_file_reason(f).decode(errors="replace")
        rc = self._lib.gdu_io_read(f, offset, length, ctypes.c_void_p(address), ctypes.byref(done),
                                   why, len(why))
        self._lib.gdu_io_close(f)
        seconds = time.perf_counter() - t0
        if rc != 0 or done.value != length:
            raise GdunlockError("GDU_ST_ERR_ENGINE" if rc != 0 else "GDU_ST_ERR_IO",
                                f"read {done.value} of {length} bytes of {path}: "
                                f"{why.value.decode() or 'the file is shorter'}")
        return seconds, reason
