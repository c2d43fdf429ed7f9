"""Differential fuzz of get_slice(...)[index] against torch's indexing of
the whole tensor (issue 54, item 6): every index form torch accepts (ints,
numpy and torch integer scalars, slices with and without steps, Ellipsis,
None, bools, lists), in range and out of it, asked in the calling patterns
that drive the read-ahead's predictions (a family asked alike along a walk,
a tensor asked for several indices in a row, the next shard walked as the
last one was). The result is torch's, and where torch raises, the error is
of torch's class. A fixed seed: the same cases every run."""
import os
import random
import sys
import tempfile
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import torch  # noqa: E402

import gdunlock  # noqa: E402
from gdunlock.walk_memory import memory  # noqa: E402

try:
    import numpy
except ImportError:
    numpy = None

SEED = 54
# (family, shape, dtype) of every layer of every shard
LAYER = (("attn.q_proj.weight", (12, 10), "float32"), ("attn.o_proj.weight", (10, 12), "bfloat16"),
         ("mlp.experts.weight", (3, 5, 4), "int16"), ("norm.weight", (10,), "float16"),
         ("cache.state", (2, 3, 2, 3), "int64"), ("mask", (7, 3), "bool"),
         ("empty", (4, 0, 3), "float32"), ("scale", (), "float64"), ("bytes", (6, 5), "uint8"))
LAYERS, SHARDS = 4, 2


def make_checkpoint(folder):
    """Two numbered shards of LAYERS layers each (the same families, values
    that say where they stand); returns their paths."""
    from safetensors.torch import save_file
    paths = []
    for s in range(SHARDS):
        tensors = {}
        for layer in range(LAYERS):
            for family, shape, dtype in LAYER:
                n = 1
                for d in shape:
                    n *= d
                values = torch.arange(n, dtype=torch.int64) + 1000 * (s * LAYERS + layer)
                if dtype == "bool":
                    values = values % 3 == 0
                else:
                    values = (values % 120).to(getattr(torch, dtype))
                tensors[f"model.layers.{s * LAYERS + layer}.{family}"] = values.reshape(shape)
        paths.append(os.path.join(folder, f"model-{s + 1:05d}-of-{SHARDS:05d}.safetensors"))
        save_file(tensors, paths[-1])
    return paths


class IndexMaker:
    """Random indices of a shape, of every form torch's indexing accepts,
    mostly valid ones."""

    def __init__(self, rng):
        self.rng = rng

    def integer(self, n):
        """An integer of some type: mostly in range, at times just outside
        it or far off."""
        r = self.rng
        value = r.randint(-n, n - 1) if n and r.random() < 0.85 else \
            r.choice([n, -n - 1, n + 3, -n - 7, 1 << 40, 0, -1])
        kind = r.random()
        if numpy is not None and kind < 0.25:
            small = -100 <= value < 100  # the narrow types hold it
            return r.choice([numpy.int64, numpy.int32 if small else numpy.int64,
                             numpy.int16 if small else numpy.int64,
                             numpy.uint8 if small and value >= 0 else numpy.int64])(value)
        if kind < 0.3:
            return torch.tensor(value)
        if numpy is not None and kind < 0.33:
            return numpy.array(value)  # 0-d: an integer to torch
        return value

    def bound(self, n):
        r = self.rng
        if r.random() < 0.3:
            return None
        value = r.randint(-n - 3, n + 3)
        kind = r.random()
        if numpy is not None and kind < 0.15:
            return numpy.int64(value)
        if kind < 0.17:
            return float(value)  # torch refuses it (TypeError)
        if kind < 0.19:
            return value > 0  # a bool: torch takes it as 0 or 1
        return value

    def slice_(self, n):
        r = self.rng
        step = r.choice([None, None, None, 1, 2, 3, 5, -1, -2, 0]) if r.random() < 0.5 else None
        if step is not None and numpy is not None and r.random() < 0.2:
            step = numpy.int64(step)
        return slice(self.bound(n), self.bound(n), step)

    def item(self, shape, d):
        """One entry of an index, for dimension d (past the last one: any
        size)."""
        r = self.rng
        n = shape[d] if d < len(shape) else r.randint(0, 4)
        kind = r.random()
        if kind < 0.3:
            return self.integer(n)
        if kind < 0.65:
            return self.slice_(n)
        if kind < 0.78:
            return Ellipsis
        if kind < 0.9:
            return None
        if kind < 0.93:
            return r.choice([True, False])
        if kind < 0.94:
            # floats (refused), 0-d masks (a uint8 one has __index__ too)
            return r.choice([1.0, -0.0, torch.tensor(1, dtype=torch.uint8), torch.tensor(True)] +
                            ([numpy.float64(1), numpy.array(True), numpy.array([0, 1]),
                              numpy.array(1, dtype=numpy.uint8)] if numpy is not None else []))
        if kind < 0.97:
            return [self.integer(n) if n else 0 for _ in range(r.randint(1, 3))]
        return torch.tensor([r.randrange(n) if n else 0 for _ in range(r.randint(1, 2))])

    def index(self, shape):
        r = self.rng
        if r.random() < 0.3:
            return self.item(shape, 0)
        count = r.choice([0, 1, 1, 2, 2, 2, 3, 3, 4, 5])
        items, d = [], 0
        for _ in range(count):
            items.append(self.item(shape, d))
            if not (items[-1] is None or items[-1] is Ellipsis or isinstance(items[-1], bool)):
                d += 1
        return tuple(items)


def torch_index(tensor, index):
    """(tensor[index], None) or (None, the exception torch raised)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return tensor[index], None
        except Exception as e:  # noqa: BLE001  (whatever torch raises is the reference)
            return None, e


def undefined_in_torch(shape, index):
    """Whether torch's result depends on memory past its sizes: a slice
    from 0 with a stop and step 1 where an Ellipsis after the first has
    moved the position past the result's dimensions (applySlice,
    ATen/TensorIndexing.h, reads the length there unchecked and keeps the
    tensor whole when it is <= the stop)."""
    if not isinstance(index, tuple) or sum(i is Ellipsis for i in index) < 2:
        return False
    spare = len(shape) - sum(1 for i in index if not (i is None or i is Ellipsis or
                                                     isinstance(i, bool)))
    at, dims = 0, len(shape)
    for i in index:
        if i is Ellipsis:
            at += spare
        elif i is None or isinstance(i, bool):  # a new axis
            at, dims = at + 1, dims + 1
        elif isinstance(i, slice):
            if at >= dims and i.start in (None, 0) and i.stop is not None and i.step in (None, 1):
                return True
            at += 1
        elif isinstance(i, int) or (numpy is not None and isinstance(i, numpy.integer)):
            dims -= 1
        else:
            at += 1
    return False


def describe(index):
    items = index if isinstance(index, tuple) else (index,)
    text = ", ".join(f"{type(i).__module__}.{type(i).__name__}({i!r})"
                     if not isinstance(i, (slice, type(None), type(Ellipsis), list)) and
                     type(i) is not int else repr(i) for i in items)
    return f"({text})" if isinstance(index, tuple) else text


@unittest.skipIf(torch is None, "torch is not installed")
class IndexFuzzTest(unittest.TestCase):
    CASES = 6000

    def setUp(self):
        try:
            import safetensors.torch  # noqa: F401
        except ImportError:
            self.skipTest("safetensors is not installed")
        # what other tests' walks taught the process must not predict these
        memory.reset()

    def check(self, f, whole, name, index, log):
        """One request: f's slice of name at index against torch's; what
        differs, or None."""
        want, error = torch_index(whole[name], index)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got, raised = f.get_slice(name)[index], None
            except Exception as e:  # noqa: BLE001
                got, raised = None, e
        case = f"{name}{list(whole[name].shape)}[{describe(index)}] after {log[-2:]}"
        log.append(describe(index))
        if undefined_in_torch(whole[name].shape, index):
            return None
        if error is not None:
            if not isinstance(raised, type(error)):
                return f"{case}: torch raised {type(error).__name__}({error}), we {raised!r}"
            return None
        if raised is not None:
            return f"{case}: torch gave {list(want.shape)}, we raised {raised!r}"
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            return f"{case}: torch gave {want!r}, we {got!r}"
        return None

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_numpy_integer_after_a_tuple(self):
        """The regression of issue 54: a numpy integer compared with the
        tuple index the family was asked before (== broadcast it into an
        array whose truth raised), in the same file and in the next shard
        after a walk of the first."""
        with tempfile.TemporaryDirectory() as d:
            from safetensors.torch import load_file
            first, second = make_checkpoint(d)
            whole = {**load_file(first), **load_file(second)}
            q = [k for k in sorted(whole) if k.endswith("q_proj.weight")]
            with gdunlock.safe_open(first, "pt", device="cpu") as f:
                for name in q[:LAYERS]:
                    self.assertTrue(torch.equal(f.get_slice(name)[1:3, 2], whole[name][1:3, 2]))
                name = q[LAYERS - 1]
                self.assertTrue(torch.equal(f.get_slice(name)[numpy.int64(1)], whole[name][1]))
            with gdunlock.safe_open(second, "pt", device="cpu") as f:
                name = q[LAYERS]
                self.assertTrue(torch.equal(f.get_slice(name)[numpy.int64(2)], whole[name][2]))

    def test_slices_equal_torch_indexing_the_whole(self):
        rng = random.Random(SEED)
        maker = IndexMaker(rng)
        done, wrong = 0, []
        with tempfile.TemporaryDirectory() as d:
            from safetensors.torch import load_file
            paths = make_checkpoint(d)
            whole = {}
            for path in paths:
                whole.update(load_file(path))
            while done < self.CASES:
                for path in paths:  # the shards in turn, as a serving engine opens them
                    with gdunlock.safe_open(path, "pt", device="cpu") as f:
                        done += self.walk(f, whole, maker, rng, wrong)
        self.assertGreaterEqual(done, self.CASES)
        if wrong:
            self.fail(f"{len(wrong)} of {done} cases differ from torch; the first:\n" +
                      "\n".join(wrong[:8]))

    def walk(self, f, whole, maker, rng, wrong):
        """One pass over f's keys in one of the callers' patterns; returns
        the number of requests made; what differs from torch goes to
        wrong."""
        keys, log, done = f.keys(), [], 0
        pattern = rng.choice(["family", "several", "random"])
        fixed = {}  # family -> the indices every tensor of it is asked for
        if pattern == "random":
            keys = rng.sample(keys, len(keys))
        for name in keys:
            family = name.split(".", 3)[-1]
            shape = whole[name].shape
            if pattern == "random":
                indices = [maker.index(shape)]
            else:
                if family not in fixed or rng.random() < 0.1:
                    count = 1 if pattern == "family" else rng.randint(2, 4)
                    fixed[family] = [maker.index(shape) for _ in range(count)]
                indices = fixed[family]
            for index in indices:
                problem = self.check(f, whole, name, index, log)
                if problem is not None:
                    wrong.append(problem)
                done += 1
        return done


if __name__ == "__main__":
    unittest.main()
