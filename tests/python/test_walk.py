"""The read-ahead policy (gdunlock.walk.Walk) driven by a fake reader: no
torch, no file (the library only for the bits of a dtype). Each test is a calling pattern of
test_loader_patterns.py (which runs the same patterns through safe_open,
torch and a real file), here read off what the walk queues: which reads
were made ahead, which a request had to submit itself, the window, what
was announced to the allocator and when the next shard was asked for."""
import os
import subprocess
import sys
import unittest
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from gdunlock import walk, walk_memory  # noqa: E402
from gdunlock._lib import GdunlockError  # noqa: E402
from gdunlock.checkpoint import TensorInfo  # noqa: E402
from gdunlock.plans import plan_tensor  # noqa: E402
from gdunlock.walk import Walk  # noqa: E402
from gdunlock.walk_memory import WalkMemory, natural_key  # noqa: E402


class FakeRead:
    """A read made ahead or submitted: its plan; nothing to wait for."""

    def __init__(self, name, plan):
        self.name, self.plan, self.pending = name, plan, self

    def wait(self):
        pass


class FakeReads:
    """What a Walk reads ahead through (PlanReads' calls), recorded: the
    reads queued, and the sizes announced to the allocator; queue() fails
    for the names in failing."""

    def __init__(self):
        self.queued, self.reserved, self.failing = [], [], set()

    def queue(self, info, plan):
        if info.name in self.failing:
            raise GdunlockError("GDU_ST_ERR_IO", f"{info.name} cannot be read (test)")
        self.queued.append((info.name, plan))
        return (info.name, plan)

    def place(self, pending, info, plan):
        return FakeRead(info.name, plan)

    def cancel(self, pending):
        pass

    def groupable(self, info, plan):
        return False

    def group(self, members):
        raise AssertionError("nothing is groupable here")

    def reserve(self, sizes):
        self.reserved.append(list(sizes))


def layered(layers=6, rows=64, cols=48):
    """A small Llama-like file's tensors: per layer a 2-D q_proj and o_proj
    and a 1-D norm, F32 ({name: shape})."""
    shapes = {}
    for i in range(layers):
        shapes[f"model.layers.{i}.self_attn.q_proj.weight"] = [rows, cols]
        shapes[f"model.layers.{i}.self_attn.o_proj.weight"] = [cols, rows]
        shapes[f"model.layers.{i}.input_layernorm.weight"] = [cols]
    return shapes


def rows(n, rank, world):
    """Rank's rows of n as tensor parallelism cuts them."""
    size = -(-n // world)
    return (slice(rank * size, min(rank * size + size, n)),)


class Walker:
    """A Walk over tensors {name: shape} (F32, laid out in key order),
    with a fake reader, and what it did."""

    def __init__(self, shapes, memory, readahead=1 << 30):
        infos, offset = {}, 0
        for name in sorted(shapes):
            n = 4
            for d in shapes[name]:
                n *= d
            infos[name] = TensorInfo(name, "F32", tuple(shapes[name]), n, 0, -1, 0, offset)
            offset += n
        self.reads, self.submitted, self.next_asked, self.dropped = FakeReads(), [], [], []
        self.walk = Walk(infos, memory.name_orders(infos), sorted(infos), self.reads,
                         self.submit, self.next_asked.append, readahead, memory)

    def submit(self, info, plan):
        self.submitted.append((info.name, plan))
        return FakeRead(info.name, plan)

    def ask(self, name, index=None):
        """One request; returns whether it was read ahead."""
        info = self.walk.infos[name]
        plan = plan_tensor(info, index)
        before = len(self.submitted)
        read = self.walk.request(info, index, plan, self.dropped)
        assert read.plan == plan, (name, index)
        return len(self.submitted) == before

    def bytes_read(self):
        return sum(plan.nbytes for _, plan in self.reads.queued + self.submitted)

    def plan(self, name, index=None):
        return plan_tensor(self.walk.infos[name], index)


def natural(shapes):
    return sorted(shapes, key=natural_key)


class WalkTest(unittest.TestCase):
    def setUp(self):
        self.memory = WalkMemory()

    def walker(self, shapes, **kw):
        return Walker(shapes, self.memory, **kw)

    def test_the_window_doubles_with_every_hit_up_to_readahead(self):
        """Whole tensors in key order: every request after the first is
        read ahead, and the window goes FIRST_WINDOW, twice, four times...
        up to readahead."""
        shapes = {f"t{i:02d}": [256] for i in range(40)}
        with mock.patch.object(walk, "FIRST_WINDOW", 1024):
            w = self.walker(shapes, readahead=8 * 1024)
            windows, ahead = [], []
            for name in sorted(shapes):
                ahead.append(w.ask(name))
                windows.append(w.walk.window)
        self.assertEqual(windows[:5], [1024, 2048, 4096, 8192, 8192])
        self.assertEqual(ahead, [False] + [True] * 39)
        self.assertEqual(w.bytes_read(), 40 * 1024)  # each byte once

    def test_a_jump_drops_the_reads_ahead_and_starts_over(self):
        shapes = {f"t{i:02d}": [256] for i in range(40)}
        with mock.patch.object(walk, "FIRST_WINDOW", 1024):
            w = self.walker(shapes)
            for name in ("t00", "t01", "t02"):
                w.ask(name)
        self.assertGreater(len(w.walk.ahead), 0)
        self.assertNotIn("t30", w.walk.ahead)
        self.assertFalse(w.ask("t30"))
        self.assertEqual((len(w.walk.ahead), w.walk.window), (0, 0))
        self.assertGreater(len(w.dropped), 0)
        self.assertFalse(w.ask("t31"))  # the first in step: the window opens again
        self.assertTrue(w.ask("t32"))

    def test_slices_in_natural_order_are_read_ahead_once(self):
        """A rank's rows of every 2-D tensor in natural order: after the
        first layer every slice was on its way before it was asked, and
        only the slices' bytes are read."""
        shapes = layered()
        w = self.walker(shapes)
        wanted = [k for k in natural(shapes) if len(shapes[k]) == 2]
        late = [k for k in wanted
                if not w.ask(k, (slice(shapes[k][0] // 4, shapes[k][0] // 2),))]
        self.assertEqual(late, wanted[:1])
        self.assertEqual(w.bytes_read(), sum(shapes[k][0] // 4 * shapes[k][1] * 4
                                             for k in wanted))

    def test_a_first_cut_is_a_guess_until_the_next_confirms_it(self):
        """A file's first cut that looks like a tensor-parallel rank's part
        predicts the families not seen yet, within four times its bytes;
        two tensors of different lengths cut alike confirm it, and the
        rest comes within the window. A family cut otherwise gets its own
        bytes right; each byte read once."""
        shapes = {"a.weight": [64, 48], "b.weight": [40, 48], "c.weight": [48, 24],
                  "d.weight": [30, 16], "e.weight": [48]}
        w = self.walker(shapes)
        w.ask("a.weight", rows(64, 3, 4))
        self.assertEqual(sorted(w.walk.ahead), ["b.weight", "c.weight", "d.weight"])
        w.ask("b.weight", rows(40, 3, 4))
        self.assertEqual(sorted(w.walk.ahead), ["c.weight", "d.weight"])
        self.assertTrue(w.ask("c.weight", rows(48, 3, 4)))
        self.assertTrue(w.ask("d.weight", rows(30, 3, 4)))
        self.assertEqual(w.bytes_read(), sum(w.plan(k, rows(shapes[k][0], 3, 4)).nbytes
                                             for k in "abcd" for k in [k + ".weight"]))

    def test_a_guess_reads_no_tensor_beyond_its_room(self):
        shapes = {"a.weight": [8, 4], "b.weight": [4096, 64]}
        w = self.walker(shapes)
        w.ask("a.weight", rows(8, 1, 2))
        self.assertEqual(len(w.walk.ahead), 0)
        self.assertFalse(w.ask("b.weight", rows(4096, 1, 2)))
        self.assertEqual(w.bytes_read(), 4 * 4 * 4 + 2048 * 64 * 4)

    def test_a_fixed_range_of_rows_costs_at_most_its_first_cut_again(self):
        shapes = layered(layers=12)
        w = self.walker(shapes)
        wanted = [k for k in sorted(shapes) if len(shapes[k]) == 2]
        for k in wanted:
            w.ask(k, (slice(16, 32),))
        want = sum(w.plan(k, (slice(16, 32),)).nbytes for k in wanted)
        self.assertLessEqual(w.bytes_read(), want + 4 * w.plan(wanted[0], (slice(16, 32),)).nbytes)

    def test_the_next_file_is_walked_as_the_last(self):
        """What one file's walk taught (the process's memory) predicts the
        next file's first slices."""
        q, o = "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight"
        self.walker(layered(layers=3)).ask(q, (slice(0, 16),))
        w = self.walker(layered(layers=3))
        w.ask(o, (slice(0, 16),))
        self.assertIn(q, w.walk.ahead)
        self.assertTrue(w.ask(q, (slice(0, 16),)))

    def test_a_walk_that_contradicts_the_last_yields(self):
        """Rank 0's walk, then rank 1's of another file: rank 1's first
        request drops what rank 0's walk predicted; none of rank 0's rows
        is read for it."""
        shapes = layered()
        wanted = [k for k in natural(shapes) if len(shapes[k]) == 2]
        first = self.walker(shapes)
        for k in wanted:
            first.ask(k, rows(shapes[k][0], 0, 4))
        w = self.walker(shapes)
        for k in wanted:
            w.ask(k, rows(shapes[k][0], 1, 4))
        self.assertEqual(w.bytes_read(), sum(w.plan(k, rows(shapes[k][0], 1, 4)).nbytes
                                             for k in wanted))

    def test_a_walk_in_key_order_does_not_sort_naturally(self):
        calls = []
        with mock.patch.object(walk_memory, "natural_key",
                               lambda name: (calls.append(name), natural_key(name))[1]):
            shapes = layered(layers=12)
            w = self.walker(shapes)
            wanted = [k for k in sorted(shapes) if len(shapes[k]) == 2]
            late = [k for k in wanted if not w.ask(k, rows(shapes[k][0], 1, 8))]
            self.assertEqual(calls, [])
            self.assertLess(len(late), len(wanted) // 2)
            w = self.walker(layered(layers=13))
            for k in [k for k in natural(layered(layers=13)) if k.endswith("q_proj.weight")]:
                w.ask(k, rows(64, 1, 8))
            self.assertNotEqual(calls, [])

    def test_requests_a_little_out_of_order_stay_in_step(self):
        """A pool of threads asks in natural order, neighbours swapped now
        and then: the walk is not reset, and each tensor is read once."""
        shapes = layered(layers=12)
        order = natural(shapes)
        for i in range(1, len(order) - 1, 5):
            order[i], order[i + 1] = order[i + 1], order[i]
        w = self.walker(shapes)
        for k in order:
            w.ask(k)
        self.assertEqual(w.bytes_read(), sum(w.plan(k).nbytes for k in shapes))
        self.assertEqual(len(w.dropped), 0)
        self.assertGreater(w.walk.window, 0)

    def test_every_rank_of_each_tensor_is_read_ahead(self):
        """Each tensor asked for all 4 ranks' rows, then columns, tensor
        after tensor: after the first layer every slice was on its way."""
        shapes = layered(layers=4)
        w = self.walker(shapes)
        late = []
        for k in natural(shapes):
            if len(shapes[k]) != 2:
                continue
            for dim in (0, 1):
                for rank in range(4):
                    cut = rows(shapes[k][dim], rank, 4)[0]
                    index = (cut,) if dim == 0 else (slice(None), cut)
                    if not w.ask(k, index) and ".layers.0." not in k:
                        late.append((k, dim, rank))
        self.assertEqual(late, [])

    def test_the_next_shard_is_asked_for_a_quarter_in(self):
        """Once the walk has queued the file's last reads and is a quarter
        through its keys, it asks for the next shard once, with the room
        left in the window."""
        shapes = layered(layers=8)
        w = self.walker(shapes)
        keys = sorted(shapes)
        for k in keys:
            w.ask(k)
            if 4 * w.walk.next < len(keys):
                self.assertEqual(w.next_asked, [], k)
        self.assertEqual(len(w.next_asked), 1)
        self.assertGreater(w.next_asked[0], 0)

    def test_a_walk_of_a_file_opened_ahead_follows_its_order(self):
        """start_as: the order of the walk before it, a window of the room
        it was given, and no next shard asked for on its own."""
        shapes = layered(layers=2)
        w = self.walker(shapes)
        w.walk.start_as(2, 1 << 20)
        dropped = []
        w.walk.fill(dropped)
        self.assertEqual(w.walk.order_kind(), 2)
        self.assertEqual(w.next_asked, [])

    def test_a_confirmed_split_announces_the_rest_of_its_file_once(self):
        shapes = layered(layers=8)
        w = self.walker(shapes, readahead=2 * 64 * 48 * 4 // 4)
        for k in sorted(shapes):
            if len(shapes[k]) == 2:
                w.ask(k, rows(shapes[k][0], 1, 4))
        self.assertLessEqual(len(w.reads.reserved), 3, w.reads.reserved)
        queued = [plan.nbytes for _, plan in w.reads.queued]
        self.assertEqual(w.reads.reserved[-1], queued[-len(w.reads.reserved[-1]):])

    def test_a_read_that_cannot_be_queued_closes_the_window(self):
        """Its error is the request's that needs those bytes: the walk stops
        reading ahead there, and that request submits its own read."""
        shapes = {f"t{i:02d}": [256] for i in range(10)}
        w = self.walker(shapes)
        w.reads.failing.add("t03")
        w.ask("t00")
        w.ask("t01")
        self.assertEqual(w.walk.window, 0)
        self.assertNotIn("t03", w.walk.ahead)
        self.assertTrue(w.ask("t02"))
        self.assertFalse(w.ask("t03"))
        self.assertTrue(w.ask("t04"))

    def test_an_index_asked_once_does_not_stay_in_the_pattern(self):
        """Every tensor whole, the first q_proj also sliced: the next
        q_proj, asked only whole, ends that pattern, so the slice is read
        ahead for at most the tensors inside the window then."""
        shapes = layered(layers=40)
        q0 = "model.layers.0.self_attn.q_proj.weight"
        w = self.walker(shapes, readahead=32 << 10)
        for k in natural(shapes):
            w.ask(k)
            if k == q0:
                w.ask(k, (slice(0, 16),))
        whole = sum(w.plan(k).nbytes for k in shapes)
        cut = w.plan(q0, (slice(0, 16),)).nbytes
        self.assertGreaterEqual(w.bytes_read(), whole + cut)
        self.assertLessEqual(w.bytes_read(), whole + 6 * cut)

    def test_a_tensor_asked_after_the_next_of_its_family_is_read_once(self):
        """Layer i's q_proj asked right after layer i + 1's (a pool of
        threads, now and then): every tensor is read once."""
        shapes, order = layered(layers=8), []
        for i in range(0, 8, 2):
            order += [f"model.layers.{i}.input_layernorm.weight",
                      f"model.layers.{i}.self_attn.o_proj.weight",
                      f"model.layers.{i + 1}.input_layernorm.weight",
                      f"model.layers.{i + 1}.self_attn.o_proj.weight",
                      f"model.layers.{i + 1}.self_attn.q_proj.weight",
                      f"model.layers.{i}.self_attn.q_proj.weight"]
        w = self.walker(shapes)
        for k in order:
            w.ask(k)
        self.assertEqual(w.bytes_read(), sum(w.plan(k).nbytes for k in shapes))

    def test_a_mispredicted_slice_is_read_again_as_asked(self):
        """q_proj asked by rows and by columns in turn: each request gets
        its own plan, read ahead or not."""
        w = self.walker(layered())
        for i in range(6):
            index = (slice(0, 8),) if i % 2 else (slice(None), slice(3, 9))
            w.ask(f"model.layers.{i}.self_attn.q_proj.weight", index)  # checks the plan

    def test_a_shard_walked_as_the_last_looks_at_each_key_once(self):
        """The second shard, predicted by the first: a family asked there
        as predicted does not send the read-ahead back over the keys."""
        families = [f"mlp.{n}.weight" for n in ("gate", "up", "down", "w4", "w5", "w6", "w7",
                                                "w8")]
        shapes = {f"model.layers.{i}.{n}": [16, 8] for i in range(6) for n in families}
        looks, predict = [0], Walk.predict

        def counting(walk_, name):
            looks[0] += 1
            return predict(walk_, name)
        with mock.patch.object(Walk, "predict", counting):
            for _ in range(2):
                looks[0] = 0
                w = self.walker(shapes)
                for k in natural(shapes):
                    w.ask(k, (slice(4, 8),))
        self.assertLessEqual(looks[0], 2 * len(shapes))

    def test_a_tensor_read_row_by_row_keeps_a_bounded_pattern(self):
        shapes = layered(layers=3, rows=512, cols=4)
        w = self.walker(shapes)
        for i in range(3):
            k = f"model.layers.{i}.self_attn.q_proj.weight"
            for r in range(512):
                w.ask(k, r)
        self.assertLessEqual(len(w.walk._families["model.layers.#.self_attn.q_proj.weight"][1]),
                             walk._PATTERN_MAX)


class WithoutTorchTest(unittest.TestCase):
    def test_the_walk_tests_run_without_torch(self):
        """The tests above in a process where torch cannot be imported: the
        walk, its plans and its memory need none."""
        blocker = ("import sys\n"
                   "class Block:\n"
                   "    def find_spec(self, name, path=None, target=None):\n"
                   "        if name == 'torch' or name.startswith('torch.'):\n"
                   "            raise ImportError('torch blocked (test)')\n"
                   "sys.meta_path.insert(0, Block())\n"
                   "import unittest\n"
                   f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
                   "import test_walk\n"
                   "suite = unittest.defaultTestLoader.loadTestsFromTestCase(test_walk.WalkTest)\n"
                   "result = unittest.TextTestRunner(verbosity=0).run(suite)\n"
                   "assert 'torch' not in sys.modules\n"
                   "sys.exit(0 if result.wasSuccessful() and not result.skipped else 1)\n")
        done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])


if __name__ == "__main__":
    unittest.main()
