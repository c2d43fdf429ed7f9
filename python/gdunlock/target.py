"""Where tensors go: host memory or one GPU (Target), and the allocations
there, through torch when it is installed."""
import os

from ._lib import TARGET_GPU, TARGET_HOST, GdunlockError
from .checkpoint import parse_device
from .reader import RangeReader

# torch's caching allocator asks the driver for every block it lacks, each
# ask costing about the same whatever its size, and gives a tensor of up to
# 10 MiB a block of 20 MiB and a larger one a block of its own: the slices
# of a rank allocated one by one asked many times where one block of their
# total, allocated and freed first, was asked once
# (bench/results/2026-12-02-h200-alloc-and-blocking-sync.md has the cost).
# Batches of reads smaller than this are left to the allocator.
RESERVE_MIN = 32 << 20
# torch serves tensors of up to 1 MiB from a pool of 2 MiB blocks of their
# own, and rounds every larger one up to 512 bytes within a block
# (kSmallSize and kMinBlockSize, c10/core/AllocatorConfig.h).
SMALL_TENSOR = 1 << 20
BLOCK_ROUND = 512


def need_torch():
    """torch, or GdunlockError GDU_ST_ERR_NO_TORCH naming what is missing."""
    try:
        import torch
    except ImportError:
        raise GdunlockError("GDU_ST_ERR_NO_TORCH", "tensors need torch, which is not "
                            "installed") from None
    return torch


def torch_if_installed():
    """torch, or None where it is not installed (numpy arrays need none)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def allocator_splits(torch):
    """Whether torch's CUDA allocator serves small tensors out of a larger
    cached block: its native allocator does unless max_split_size_mb keeps
    large blocks whole; expandable segments map memory by the byte (nothing
    to save), and cudaMallocAsync has no such cache."""
    try:
        if torch.cuda.get_allocator_backend() != "native":
            return False
    except (AttributeError, RuntimeError):
        return False
    conf = ",".join(os.environ.get(k, "") for k in ("PYTORCH_CUDA_ALLOC_CONF",
                                                    "PYTORCH_ALLOC_CONF"))
    conf = conf.replace(" ", "").lower()
    return "max_split_size_mb" not in conf and "expandable_segments:true" not in conf


class Target:
    """Where tensors go: host memory or one GPU; allocates there."""

    def __init__(self, device):
        if hasattr(device, "type") and hasattr(device, "index") and device.type == "cuda" \
                and device.index is None:
            device = "cuda"
        target, gpus = parse_device(device)
        if len(gpus) != 1:
            raise ValueError(f"one device, not {device!r}")
        self.torch = need_torch() if target == TARGET_GPU else torch_if_installed()
        self.target = target
        self.ordinal = gpus[0]
        self.device = "cpu" if self.torch is None else self.torch.device("cpu") \
            if target == TARGET_HOST else self.torch.device("cuda", self.ordinal)
        self._reserving = target == TARGET_GPU and allocator_splits(self.torch)
        self._streams = None  # (read the current stream's id, the default stream, its id)

    def reader(self):
        return RangeReader(self.target, self.ordinal)

    def reserve(self, sizes):
        """Before allocations of sizes (bytes each) in a row on a GPU: one
        block that holds those torch takes out of its large blocks,
        allocated and freed, which torch's caching allocator keeps and splits
        for them (RESERVE_MIN). Nothing for host memory, a smaller batch, an
        allocator that would not split the block, or when the GPU has less
        than twice the block free (torch would empty its cache to make room,
        and the reads' own allocations report a shortage)."""
        if not self._reserving:
            return
        nbytes = sum(-(-n // BLOCK_ROUND) * BLOCK_ROUND for n in sizes if n > SMALL_TENSOR)
        if nbytes < RESERVE_MIN:
            return
        try:
            free, _ = self.torch.cuda.mem_get_info(self.device)
            if 2 * nbytes <= free:
                self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
        except RuntimeError:  # a shortage after all: the allocations will say
            pass

    def empty(self, nbytes, dtype=None, shape=None):
        """nbytes of memory on the device: a tensor of torch dtype and shape
        (nbytes theirs) when dtype is given, else 1-D uint8. The engine copies on
        its own streams, which wait for the legacy default stream's work but
        not for other streams': a caller on a side stream is synchronized
        first, so that memory its kernels were still using is not written."""
        try:
            buf = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device) \
                if dtype is None else self.torch.empty(shape, dtype=dtype, device=self.device)
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError, a bad device
            code = "GDU_ST_ERR_DEVICE_MEMORY" if "out of memory" in str(e).lower() else \
                "GDU_ST_ERR_NO_CUDA"
            raise GdunlockError(code, f"{nbytes} bytes on {self.device}: "
                                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        if self.target == TARGET_GPU and self._on_side_stream():
            self.torch.cuda.current_stream(self.device).synchronize()
        return buf

    def _on_side_stream(self):
        """Whether the caller's current stream on the GPU is not its default
        one. Read by id, as torch.cuda.current_stream() reads it, without
        the Stream object it makes: every result is allocated here, and the
        object cost more than the allocation's own Python."""
        if self._streams is None:  # the device's default stream, the same for the process
            default = self.torch.cuda.default_stream(self.device)
            self._streams = (getattr(self.torch._C, "_cuda_getCurrentStream", None), default,
                             default.stream_id)
        current_id, default, default_id = self._streams
        if current_id is None:  # a torch without it
            return self.torch.cuda.current_stream(self.device) != default
        return current_id(self.ordinal)[0] != default_id
