"""The parts of the accelerator machine's instruments (bench/gpu) that decide
what their runs say, run here without a GPU: patterns_ab.py's variants,
their order in each round, and its summary of the processes' lines;
load_patterns.py's order of runs, and what a resumed run still makes;
first_rank_parts.py's small copy of a checkpoint; and that
bench/loader_python_cost.py keeps the engine out of what it times."""
import os
import struct
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "gpu"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import first_rank_parts  # noqa: E402
import loader_python_cost  # noqa: E402
import load_patterns  # noqa: E402
import patterns_ab  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import torch  # noqa: E402
from test_gdunlock_api import write_safetensors  # noqa: E402


class PatternsAbTest(unittest.TestCase):
    def test_a_variant_is_a_name_and_its_environment(self):
        self.assertEqual(patterns_ab.parse_variant("w12=GDUNLOCK_IO_WORKERS=12"),
                         ("w12", {"GDUNLOCK_IO_WORKERS": "12"}))
        self.assertEqual(patterns_ab.parse_variant("old=PYTHONPATH=/a=b,GDUNLOCK_IO_WORKERS=8"),
                         ("old", {"PYTHONPATH": "/a=b", "GDUNLOCK_IO_WORKERS": "8"}))
        self.assertEqual(patterns_ab.parse_variant("tree="), ("tree", {}))
        for bad in ("tree", "=X=1", "w=X", "w=X=1,=2"):
            with self.assertRaises(ValueError, msg=bad):
                patterns_ab.parse_variant(bad)

    def test_every_other_round_reverses_the_order(self):
        v = {"a": {}, "b": {}, "c": {}}
        self.assertEqual(patterns_ab.order(v, 0), ["a", "b", "c"])
        self.assertEqual(patterns_ab.order(v, 1), ["c", "b", "a"])
        self.assertEqual(patterns_ab.order(v, 2), ["a", "b", "c"])

    def test_the_summary_is_first_ranks_and_later_medians(self):
        lines = [
            {"variant": "a", "round": 0, "result": {"case": "rows-8",
                                                    "seconds": [0.030, 0.020, 0.018, 0.019]}},
            {"variant": "b", "round": 0, "result": {"case": "rows-8", "error": "no GPU"}},
            {"variant": "b", "round": 0, "result": {"case": "whole", "seconds": [0.125]}},
            {"variant": "a", "round": 1, "result": {"case": "rows-8",
                                                    "seconds": [0.028, 0.017, 0.021]}},
        ]
        s = patterns_ab.summarize(lines)
        self.assertEqual(list(s), ["rows-8", "whole"])
        firsts, laters = s["rows-8"]["a"]
        self.assertEqual([round(x, 6) for x in firsts], [30.0, 28.0])
        self.assertEqual([round(x, 6) for x in laters], [19.0, 19.0])
        self.assertNotIn("b", s["rows-8"])  # the failed process is left out
        self.assertEqual(s["whole"]["b"][1], [])  # one rank: no later ones
        text = patterns_ab.render(s)
        self.assertIn("first 30.0 / 28.0 (median 29.0); later 19.0 / 19.0", text)
        self.assertIn("first 125.0 (median 125.0)", text)

    def test_first_ranks_are_compared_round_by_round(self):
        def line(variant, r, first, case="rows-8"):
            return {"variant": variant, "round": r, "result": {"case": case,
                                                               "seconds": [first, 0.016]}}
        lines = [line("off", 0, 0.020), line("on", 0, 0.019),
                 line("on", 1, 0.050), line("off", 1, 0.049),  # a disturbed round
                 line("off", 2, 0.021), line("on", 2, 0.018),
                 line("on", 3, 0.017),  # off failed here: nothing to compare
                 {"variant": "off", "round": 3, "result": {"case": "rows-8", "error": "x"}},
                 line("off", 0, 0.030, "cols-8"), line("on", 0, 0.031, "cols-8")]
        pairs = patterns_ab.paired(lines, "off")
        self.assertEqual(pairs, {"rows-8": {"on": (2, 3)}, "cols-8": {"on": (0, 1)}})
        self.assertIn("rows-8     on           first rank shorter than off's in 2 of 3 rounds",
                      patterns_ab.render_paired(pairs, "off"))



class LoadPatternsTest(unittest.TestCase):
    PLAN = [("whole", "gd"), ("whole", "st"), ("rows-4", "gd")]

    def test_every_other_round_runs_backwards(self):
        self.assertEqual(load_patterns.still_to_run(self.PLAN, 2, []), [
            (0, "whole", "gd"), (0, "whole", "st"), (0, "rows-4", "gd"),
            (1, "rows-4", "gd"), (1, "whole", "st"), (1, "whole", "gd")])

    def test_a_resumed_run_makes_only_what_is_missing(self):
        made = [{"round": 0, "case": c, "loader": l} for c, l in self.PLAN] + \
            [{"round": 1, "case": "rows-4", "loader": "gd"}]
        self.assertEqual(load_patterns.still_to_run(self.PLAN, 2, made),
                         [(1, "whole", "st"), (1, "whole", "gd")])
        self.assertEqual(load_patterns.still_to_run(self.PLAN, 1, made), [])


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(torch is None, "torch is not installed")
class FirstRankPartsTest(unittest.TestCase):
    def test_the_small_copy_keeps_names_dtypes_and_ranks_and_is_made_once(self):
        """The python variant walks a copy of the checkpoint with the same
        names, dtypes and ranks, each dimension cut to 64, so that the
        loader's code runs as for the real one; a second process reuses it."""
        import safetensors
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "model")
            os.makedirs(src)
            for i, shape in enumerate(([300, 70], [5], [64, 2, 100])):
                n = 1
                for k in shape:
                    n *= k
                write_safetensors(os.path.join(src, f"model-0000{i + 1}-of-00003.safetensors"),
                                  {f"layers.{i}.w": ("BF16", shape, bytes(2 * n)),
                                   f"layers.{i}.b": ("F32", [3], struct.pack("<3f", 1, 2, 3))})
            small = first_rank_parts.tiny_copy(src, src + "-tiny")
            self.assertEqual([os.path.basename(p) for p in small],
                             [os.path.basename(p) for p in load_patterns.shards(src)])
            for i, (path, shape) in enumerate(zip(small, ([64, 64], [5], [64, 2, 64]))):
                with safetensors.safe_open(path, framework="pt") as f:
                    self.assertEqual(sorted(f.keys()), [f"layers.{i}.b", f"layers.{i}.w"])
                    self.assertEqual(f.get_slice(f"layers.{i}.w").get_shape(), shape)
                    self.assertEqual(f.get_slice(f"layers.{i}.w").get_dtype(), "BF16")
                    self.assertEqual(f.get_slice(f"layers.{i}.b").get_dtype(), "F32")
            made = os.path.getmtime(small[0])
            os.utime(small[0], (made - 100, made - 100))
            first_rank_parts.tiny_copy(src, src + "-tiny")
            self.assertEqual(os.path.getmtime(small[0]), made - 100)


@unittest.skipIf(torch is None, "torch is not installed")
class LoaderPythonCostTest(unittest.TestCase):
    def test_no_read_reaches_the_engine_and_a_moved_funnel_is_refused(self):
        """The script times the loader's own Python: with its stub in place
        a rank's slices, and the batches read ahead, never open a file on
        the engine (the reader's _file); and it refuses to run where the
        funnel it stubs is gone, instead of timing the reads."""
        import gdunlock
        from gdunlock import reader
        with tempfile.TemporaryDirectory() as d:
            for i in (1, 2):
                write_safetensors(os.path.join(d, f"model-0000{i}-of-00002.safetensors"),
                                  {f"layers.{i}.{k}.weight": ("F32", [64, 32], bytes(4 * 64 * 32))
                                   for k in ("q", "k", "v", "o")})
            with mock.patch.object(reader.RangeReader, "_queue", reader.RangeReader._queue), \
                    mock.patch.object(reader.RangeReader, "_file",
                                      side_effect=AssertionError("a read reached the engine")):
                loader_python_cost.leave_the_engine_out()
                for path in load_patterns.shards(d):
                    with gdunlock.safe_open(path, framework="pt", device="cpu") as f:
                        for k in f.keys():
                            self.assertEqual(list(f.get_slice(k)[0:16].shape), [16, 32])
            with mock.patch.object(reader.RangeReader, "_queue", None):
                with self.assertRaises(SystemExit):
                    loader_python_cost.leave_the_engine_out()
