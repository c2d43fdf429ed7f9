"""The I/O engines a process keeps, one per target (host memory, each GPU):
made by the first load that needs one and kept for the next, so that only
the first pays for its worker threads and pinned staging (what that costs:
bench/results/2026-12-02-h200-first-rank-prepare.md).
prepare() starts them ahead of the load, release_engines() frees them."""
import ctypes
import os
import threading

from ._lib import TARGET_HOST, StError, check, lib
from .bool_words import env_bool
from .checkpoint import parse_device


class Preparation:
    """The start of the engines for one device, under way on a thread of its
    own (prepare). wait() blocks until they are started and raises the
    GdunlockError of one that could not be made."""

    def __init__(self, target, ordinals):
        self._error = None
        self._thread = threading.Thread(target=self._start, args=(target, ordinals),
                                        name="gdunlock-prepare", daemon=True)
        self._thread.start()

    def _start(self, target, ordinals):
        native = lib()
        host = 1 if target == TARGET_HOST else 0
        why = ctypes.create_string_buffer(256)
        try:
            for device in ordinals:
                engine, err = ctypes.c_void_p(), StError()
                check(native.gdu_st_engine_acquire(host, 0 if host else device,
                                                   ctypes.byref(engine), ctypes.byref(err)), err)
                # Staging it could not pin is not an error: its loads go on
                # with what it has, as they do without prepare().
                native.gdu_io_engine_prestage(engine, why, len(why))
                native.gdu_st_engine_return(engine)
        except Exception as e:  # noqa: BLE001 - handed to wait()
            self._error = e

    def done(self):
        return not self._thread.is_alive()

    def wait(self, timeout=None):
        """Blocks until the start is over (or timeout seconds); True when it
        is. Raises the start's error."""
        self._thread.join(timeout)
        if self._error is not None:
            raise self._error
        return self.done()


def prepare(device=0):
    """Starts the I/O engine(s) for device (as load_safetensors accepts it)
    on a background thread and returns at once (a Preparation): a load,
    safe_open or weights_iterator on that device later finds its engine
    running and its staging pinned. Call it where the process has other work
    before its first load, such as building the model: a serving engine's
    loader calls it before the model is made. CUDA must be usable in the
    process (the engine uses the device's primary context, as torch does).
    An engine that cannot start raises from wait(), or from the first load
    that needs it."""
    target, ordinals = parse_device(device)
    return Preparation(target, ordinals)


_start_queued = []  # torch modules start_with_cuda queued the start in


def start_with_cuda(torch):
    """Has the engine of the process's GPU start while torch initializes
    CUDA (at once when it has), as prepare() would: the start then overlaps
    CUDA's own, which takes far longer (the same report), and
    the first load finds the engine running. Only where one GPU is visible,
    so that the engine's device is known; once per torch; nothing with
    GDUNLOCK_PREPARE=0 or a torch without the hook (torch.cuda._lazy_call,
    which runs queued calls once CUDA is initialized, as
    torch.cuda.manual_seed does)."""
    lazy_call = getattr(getattr(torch, "cuda", None), "_lazy_call", None)
    if not env_bool(os.environ, "GDUNLOCK_PREPARE", True) or lazy_call is None or \
            any(t is torch for t in _start_queued):
        return
    _start_queued.append(torch)

    def start():
        # Runs inside torch's initialization: whatever happens, it must not
        # raise (torch would fail its own start), and it only starts a thread.
        try:
            if torch.cuda.device_count() == 1:
                prepare(0)
        except Exception:  # noqa: BLE001 - the first load reports a failed start
            pass

    try:
        lazy_call(start)
    except Exception:  # noqa: BLE001 - a changed private hook: no early start
        pass


def release_engines():
    """Frees the I/O engines the loads of this process keep (worker threads,
    pinned staging buffers); the next load creates them again. Raises
    GdunlockError (GDU_ST_ERR_BUSY) while a load runs or a safe_open,
    weights_iterator or prepare() uses them."""
    err = StError()
    check(lib().gdu_st_engines_release(ctypes.byref(err)), err)
