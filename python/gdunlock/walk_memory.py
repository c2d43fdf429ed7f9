"""What walks of earlier files taught the process (WalkMemory): how each
family of tensors was asked last, and the tensor-parallel cut confirmed
last, so that the next shard of a checkpoint is walked as the last one
was; with the names' orders and the cuts worked out once. One object,
`memory`, with one reset."""
import re

from .plans import index_key
from .slicing import SliceError, normalize

# the numbers of a name: taken out for its family, compared as numbers when
# names are sorted (split keeps them: the group)
_DIGITS = re.compile(r"(\d+)")
_FAMILIES_KEPT = 4096
_NAMES_KEPT = 1 << 16
_CUTS_KEPT = 4096
# sorted names whose orders are kept: the ranks of a tensor-parallel load
# open each shard once each
_ORDERS_KEPT = 64


def natural_key(name):
    """layers.2 before layers.10: numbers compare as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(name)]


class NameOrders:
    """A file's names sorted, with {name: position}, and the same in natural
    order, worked out the first time a walk needs it: a walk in key order
    never looks at it, and sorting naturally costs every open of a shard
    (each rank's) for nothing (bench/results/2026-12-03-h200-first-rank-python.md).
    Shared by the opens of files with the same names (not to be changed)."""

    def __init__(self, keys):
        self.keys, self.at_key = keys, {k: i for i, k in enumerate(keys)}
        self._natural = None

    def natural(self):
        """(the names in natural order, {name: position} in it)."""
        if self._natural is None:  # two opens may both make it: the same
            natural = sorted(self.keys, key=natural_key)
            self._natural = natural, {k: i for i, k in enumerate(natural)}
        return self._natural


def find_split(shape, index):
    """(ndim, dim, world, rank) when index is one rank's part of one
    dimension, as tensor parallelism cuts it (ceil(n / world) elements a
    rank, the last rank's part short), every other dimension whole; else
    None."""
    try:
        items = normalize(index, len(shape))
    except (TypeError, SliceError):
        return None
    if not all(isinstance(s, slice) for s in items):  # an int or a new axis
        return None
    part = None
    for d, s in enumerate(items):
        start, stop, step = s.indices(shape[d])
        if step != 1:
            return None
        if (start, stop) != (0, shape[d]):
            if part is not None:
                return None
            part = (d, start, stop)
    if part is None:
        return None
    d, start, stop = part
    n = shape[d]
    for world in range(2, 257):
        size = -(-n // world)
        if start < n and start % size == 0 and stop == min(start + size, n):
            return len(shape), d, world, start // size
    return None


def split_index(shape, split):
    """The index of split's rank in a tensor of shape, or None when shape
    has another number of dimensions or the rank gets nothing of it."""
    ndim, d, world, rank = split
    if len(shape) != ndim:
        return None
    size = -(-shape[d] // world)
    start = rank * size
    if start >= shape[d]:
        return None
    return (slice(None),) * d + (slice(start, min(start + size, shape[d])),)


class WalkMemory:
    """The memory of earlier walks, shared by every safe_open of the
    process: families (family -> (shape, indices) last asked through any
    of them), last_split (the cut confirmed last), and what is worked out
    once and asked often (families of names, orders of names, cuts)."""

    def __init__(self):
        self.reset()

    def reset(self):
        """Forgets everything: the next walk starts as the first did."""
        self.families = {}
        self.last_split = None
        self._family_of = {}
        self._orders = {}
        self._cuts = {}

    def remember(self, family, seen):
        """The family was last asked as seen ((shape, indices))."""
        if len(self.families) >= _FAMILIES_KEPT:
            self.families.clear()
        self.families[family] = seen

    def family(self, name):
        """name with its numbers taken out, worked out once a name: a walk
        asks it of every key it looks at."""
        family = self._family_of.get(name)
        if family is None:
            if len(self._family_of) >= _NAMES_KEPT:
                self._family_of.clear()
            family = self._family_of[name] = _DIGITS.sub("#", name)
        return family

    def name_orders(self, names):
        """The NameOrders of names."""
        keys = sorted(names)
        key = tuple(keys)
        orders = self._orders.get(key)
        if orders is None:
            orders = NameOrders(keys)
            if len(self._orders) >= _ORDERS_KEPT:
                self._orders.clear()
            self._orders[key] = orders
        return orders

    def split_of(self, shape, index):
        """find_split, worked out once a shape and index: a walk asks it of
        every key it predicts."""
        key = index_key(index)
        if key is None:
            return find_split(shape, index)
        key = (tuple(shape), key)
        if key not in self._cuts:
            if len(self._cuts) >= _CUTS_KEPT:
                self._cuts.clear()
            self._cuts[key] = find_split(shape, index)
        return self._cuts[key]


memory = WalkMemory()
