"""The byte ranges a basic index of a tensor needs (plan_read), and the
errors of an index a tensor cannot take. No torch here: torch's own
indexing is the model (normalize)."""
import array
import ctypes
import math
import numbers

from ._lib import GdunlockError


class SliceError(GdunlockError, IndexError):
    """An index a tensor cannot take (out of range, more indices than
    dimensions): a GdunlockError that is also an IndexError."""

    def __init__(self, message):
        super().__init__("GDU_ST_ERR_SLICE", message)


class SliceStepError(SliceError, ValueError):
    """A slice step <= 0: also a ValueError, as torch and safetensors raise."""


def normalize(index, ndim):
    """index -> one entry per dimension (an int or a slice), with None
    (a new axis) kept where it stands, as torch 2.13 indexes
    (applySlicing, aten/src/ATen/TensorIndexing.h): the entries are taken
    in order with a position among the result's dimensions; an Ellipsis
    moves it on by the dimensions no entry names, so that a second
    Ellipsis moves it past them (fine at the end of the index, and when
    every dimension is named; anything after it is then out of range). A
    slice step <= 0 raises SliceStepError where torch's order meets it.
    Raises TypeError for advanced indexing (lists, tensors, masks)."""
    if isinstance(index, slice):  # torch slices a lone one before counting dimensions
        check_slice(index)
    if not isinstance(index, tuple):
        index = (index,)
    # Anything but Python's and numpy's integers, slices, None and Ellipsis
    # is torch's own indexing, read whole: a bool is a scalar mask, and so
    # is a 0-d uint8 tensor or array, which has __index__ all the same.
    if not all(i is None or i is Ellipsis or isinstance(i, slice) or
               (isinstance(i, numbers.Integral) and not isinstance(i, bool)) for i in index):
        raise TypeError("advanced index")
    real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if real > ndim:
        raise SliceError(f"too many indices for a tensor of {ndim} dimensions: {real}")
    spare = ndim - real
    entries = [slice(None)] * ndim
    result = list(range(ndim))  # the result's dimensions: a dimension of the tensor, or None
    at = 0  # the position in result the next entry applies to
    for i in index:
        if i is Ellipsis:
            at += spare
            continue
        if i is None:
            if at > len(result):
                raise SliceError(f"a new axis at dimension {at} of a result of {len(result)}")
            result.insert(at, None)
            at += 1
            continue
        if isinstance(i, slice):
            check_slice(i)
        else:
            i = int(i)
        if at >= len(result):
            # torch reads the size there from past the end of its sizes: a
            # whole slice (start 0, no stop, step 1) takes all of it whatever
            # it reads; any other entry is out of range (or, with a stop,
            # compared with whatever lies there)
            if isinstance(i, slice) and i.start in (None, 0) and i.stop is None and \
                    i.step in (None, 1):
                at += 1
                continue
            raise SliceError(f"dimension {at} is out of range: the result has {len(result)} "
                             f"(an Ellipsis after the first moves past the dimensions it spans)")
        # entries land on the tensor's dimensions only: new axes stay behind
        entries[result[at]] = i
        if isinstance(i, slice):
            at += 1
        else:
            del result[at]
    return _in_order(entries, result)


def _in_order(entries, result):
    """The entries of every dimension in order, each new axis (None in
    result, the result's dimensions) before the dimension after it."""
    seq, d = [], 0
    for kept in result:
        if kept is None:
            seq.append(None)
        else:
            seq += entries[d:kept + 1]
            d = kept + 1
    return seq + entries[d:]


def check_slice(item):
    """Raises TypeError for slice bounds that are not integers (read whole:
    torch's TypeError), SliceStepError for a step <= 0, in torch's words."""
    if not all(p is None or hasattr(p, "__index__") for p in (item.start, item.stop, item.step)):
        raise TypeError("slice bounds must be integers")
    step = item.step
    if step is None or isinstance(step, bool):
        return
    try:
        step = step.__index__()
    except TypeError:  # a float tensor: torch's own error
        raise TypeError("slice bounds must be integers") from None
    if step == 0:
        raise SliceStepError("slice step cannot be zero")
    if step < 0:
        raise SliceStepError("step must be greater than zero")


def plan_slice(shape, bits, index):
    """The reads a basic index of a tensor needs.

    shape: the tensor's dimensions; bits: bits per element (a multiple of 8);
    index: what tensor[index] takes (ints, slices with a positive step,
    Ellipsis, None). Returns (runs, box_shape, post): runs are (byte offset
    within the tensor, length) of the smallest box of elements holding the
    result, in row-major order, box_shape that box's dimensions, and post the
    index that turns the box (viewed as box_shape) into the result. Raises
    SliceError for an index out of range and TypeError for advanced
    indexing (lists, tensors, masks), which the callers read whole."""
    ndim = len(shape)
    lo, hi, post = [], [], []
    for item in normalize(index, ndim):
        if item is None:
            post.append(None)
            continue
        d = len(lo)
        n = shape[d]
        if isinstance(item, int):
            i = item + n if item < 0 else item
            if not 0 <= i < n:
                raise SliceError(f"index {item} is out of bounds for dimension {d} with size {n}")
            lo.append(i)
            hi.append(i + 1)
            post.append(0)
            continue
        for part in (item.start, item.stop, item.step):
            if part is not None and not (hasattr(part, "__index__") and not isinstance(part, bool)):
                raise TypeError("slice bounds must be integers")
        start, stop, step = slice(*(None if p is None else p.__index__()
                                    for p in (item.start, item.stop, item.step))).indices(n)
        count = len(range(start, stop, step))
        if count == 0:
            lo.append(min(start, n))
            hi.append(min(start, n))
            post.append(slice(0, 0))
        else:
            lo.append(start)
            hi.append(start + (count - 1) * step + 1)
            post.append(slice(0, hi[-1] - lo[-1], step))
    box = [h - l for l, h in zip(lo, hi)]
    esize = bits // 8
    if any(b == 0 for b in box):
        return Runs(0, [(0, 0)], 0), box, tuple(post)
    # The trailing dimensions the box covers whole are contiguous with the
    # last partial one: each run spans them.
    k = ndim - 1
    while k >= 0 and lo[k] == 0 and hi[k] == shape[k]:
        k -= 1
    if k < 0:
        return Runs(0, [], math.prod(shape) * esize), box, tuple(post)
    strides = [math.prod(shape[d + 1:]) * esize for d in range(ndim)]
    base = sum(lo[d] * strides[d] for d in range(k + 1))
    return Runs(base, [(box[d], strides[d]) for d in range(k)], box[k] * strides[k]), box, \
        tuple(post)


class Runs:
    """The byte runs of a box of a tensor, without a list of them: `length`
    bytes at base + sum(i_d * stride_d) for every i_d < count_d of the
    outer dimensions dims [(count, stride)], in row-major order. A column of
    a [32000, 4096] tensor is 32000 runs: extents() has the library build
    the engine's array of them. It also reads as a list of (offset, length)
    pairs."""

    def __init__(self, base, dims, length):
        self.base, self.dims, self.length = base, dims, length
        self.count = math.prod(c for c, _ in dims) if length else 0
        self.nbytes = self.count * length
        self._box = None

    def offsets(self, at=0):
        """The runs' offsets plus at, an array('Q'), in order."""
        out = array.array("Q")
        if not self.count:
            return out
        starts = [self.base + at]
        for count, stride in self.dims[:-1]:
            starts = [o + i * stride for o in starts for i in range(count)]
        if not self.dims:
            out.extend(starts)
            return out
        count, stride = self.dims[-1]
        for o in starts:
            out.extend(range(o, o + count * stride, stride))
        return out

    def box(self):
        """The box the engine reads these runs as (gdu_io_submit_box): its
        outer counts and strides (ctypes arrays, or None), their number and
        the run length; no runs is one run of 0 bytes. Made once: a plan's
        runs serve every request of that plan."""
        if self._box is None:
            nd = len(self.dims) if self.count else 0
            counts = (ctypes.c_uint64 * nd)(*[c for c, _ in self.dims]) if nd else None
            strides = (ctypes.c_uint64 * nd)(*[s for _, s in self.dims]) if nd else None
            self._box = (counts, strides, nd, self.length if self.count else 0)
        return self._box

    def __len__(self):
        return self.count

    def __iter__(self):
        return ((o, self.length) for o in self.offsets())

    def __eq__(self, other):
        if isinstance(other, Runs):
            return (self.base, self.dims, self.length, self.count) == \
                (other.base, other.dims, other.length, other.count) or \
                (self.count == other.count == 0)
        return list(self) == list(other)

    __hash__ = None


def plan_read(shape, bits, index):
    """plan_slice for any dtype. A sub-byte dtype (F4, F6_*) is planned in
    bytes: its rows must end on a byte, and an index may cut its last
    dimension only at element boundaries that are byte boundaries (a slice
    with step 1); the box is then in bytes. Raises SliceError naming the
    element where a byte cannot be cut, TypeError for advanced indexing."""
    if bits % 8 == 0:
        return plan_slice(shape, bits, index)
    shape = list(shape)
    if not shape or shape[-1] * bits % 8:
        raise SliceError(f"a {bits}-bit tensor of shape {shape} cannot be sliced: its rows do "
                         f"not end on a byte; read it whole (get_tensor)")
    items = normalize(index, len(shape))
    real = [i for i, item in enumerate(items) if item is not None]
    last = items[real[-1]]
    n = shape[-1]
    if isinstance(last, int) or (last.step is not None and last.step.__index__() != 1):
        raise SliceError(f"a {bits}-bit tensor's last dimension can be sliced only in byte-sized "
                         f"runs (a slice with step 1), not with {last!r}")
    start, stop, _ = slice(*(None if p is None else p.__index__()
                             for p in (last.start, last.stop, None))).indices(n)
    stop = max(start, stop)
    if start * bits % 8 or stop * bits % 8:
        raise SliceError(f"elements {start}..{stop} of a {bits}-bit dimension do not start and "
                         f"end on a byte")
    items[real[-1]] = slice(start * bits // 8, stop * bits // 8)
    return plan_slice(shape[:-1] + [n * bits // 8], 8, tuple(items))
