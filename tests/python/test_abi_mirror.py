"""The module's ctypes mirrors against the library's own layout
(gdu_st_abi_layout): they agree as built, and a mirror one field off, a
constant changed, or a code of the module's that is not declared is caught.
CPU only: the library, no GPU, no torch."""
import ctypes
import json
import os
import re
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from gdunlock import _lib  # noqa: E402


class AbiMirror(unittest.TestCase):
    def setUp(self):
        self.layout = _lib.lib().gdu_st_abi_layout()

    def test_mirrors_match_the_library(self):
        self.assertEqual(_lib.layout_problems(self.layout), [])
        doc = json.loads(self.layout)
        self.assertEqual(set(doc["structs"]), set(_lib.MIRRORS))

    def test_a_field_off_by_one_is_caught(self):
        saved = _lib.MIRRORS["gdu_st_tensor"]

        class Shifted(ctypes.Structure):  # ndim as 64 bits: shape and all after move
            _fields_ = [(n, ctypes.c_uint64 if n == "ndim" else t) for n, t in saved._fields_]

        _lib.MIRRORS["gdu_st_tensor"] = Shifted
        try:
            problems = _lib.layout_problems(self.layout)
        finally:
            _lib.MIRRORS["gdu_st_tensor"] = saved
        self.assertTrue(any("gdu_st_tensor fields" in p and "'ndim'" in p for p in problems),
                        problems)

    def test_a_renamed_field_is_caught(self):
        saved = _lib.MIRRORS["gdu_io_options"]

        class Renamed(ctypes.Structure):
            _fields_ = [("threads" if n == "workers" else n, t) for n, t in saved._fields_]

        _lib.MIRRORS["gdu_io_options"] = Renamed
        try:
            problems = _lib.layout_problems(self.layout)
        finally:
            _lib.MIRRORS["gdu_io_options"] = saved
        self.assertTrue(any("gdu_io_options" in p for p in problems), problems)

    def test_a_changed_constant_is_caught(self):
        saved = dict(_lib.CONSTANTS)
        _lib.CONSTANTS["GDU_IO_BACKEND_HOST"] = 2
        try:
            problems = _lib.layout_problems(self.layout)
        finally:
            _lib.CONSTANTS.clear()
            _lib.CONSTANTS.update(saved)
        self.assertTrue(any("GDU_IO_BACKEND_HOST" in p for p in problems), problems)

    def test_every_code_raised_is_shared_or_declared(self):
        statuses = set(json.loads(self.layout)["statuses"])
        used = set()
        pkg = os.path.join(ROOT, "python", "gdunlock")
        for name in os.listdir(pkg):
            if name.endswith(".py"):
                with open(os.path.join(pkg, name)) as f:
                    used |= set(re.findall(r'"(GDU_[A-Z0-9_]+)"', f.read()))
        used -= set(_lib.CONSTANTS)  # constant names, not codes
        undeclared = sorted(used - statuses - set(_lib.MODULE_CODES))
        self.assertEqual(undeclared, [], "codes neither the library's nor in MODULE_CODES")
        self.assertEqual(sorted(set(_lib.MODULE_CODES) & statuses), [])



class DtypeBitsTest(unittest.TestCase):
    def test_tensor_info_carries_the_library_bits(self):
        """Each tensor's bits per element come from the library's dtype
        table (gdu_st_dtype_bits), the one the C loader checks sizes with:
        Python keeps no copy of its own."""
        from gdunlock.checkpoint import Checkpoint
        want = {"BOOL": 8, "U8": 8, "F4": 4, "F8_E5M2": 8, "F8_E4M3": 8, "F16": 16, "BF16": 16,
                "I32": 32, "F32": 32, "I64": 64, "F64": 64}
        with Checkpoint(os.path.join(ROOT, "tests", "fixtures", "safetensors",
                                     "small.safetensors")) as ckpt:
            got = {t.dtype: t.bits for t in ckpt.tensors()}
        self.assertEqual(got, want)

    def test_every_dtype_name_has_the_library_bits(self):
        from gdunlock.checkpoint import dtype_bits
        for name, bits in (("F6_E2M3", 6), ("F6_E3M2", 6), ("F8_E8M0", 8), ("C64", 64),
                           ("U64", 64)):
            self.assertEqual(dtype_bits(name), bits, name)
        with self.assertRaises(ValueError):
            dtype_bits("F128")


if __name__ == "__main__":
    unittest.main()
