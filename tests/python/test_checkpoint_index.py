"""Checkpoint's indexes are checked before they reach the C library:
metadata(1) on a one-file checkpoint and metadata(-1) dereferenced a NULL
header in C (SIGSEGV), tensor(99) raised "NULL pointer access". Indexes
count from the end when negative, as a list's do."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import SHARDED, SMALL  # noqa: E402

import gdunlock  # noqa: E402


class CheckpointIndexTest(unittest.TestCase):
    def test_file_indexes(self):
        with gdunlock.Checkpoint(SMALL) as c:
            self.assertEqual(c.metadata(-1), c.metadata(0))
            for bad in (1, -2, 2**64):
                with self.assertRaisesRegex(IndexError, "file index .* out of range"):
                    c.metadata(bad)
                with self.assertRaises(IndexError):
                    c.metadata_or_none(bad)
            with self.assertRaises(TypeError):
                c.metadata(0.5)
        with gdunlock.Checkpoint(SHARDED) as c:
            self.assertEqual(c.metadata_or_none(1), c.metadata_or_none(-1))
            with self.assertRaises(IndexError):
                c.metadata(2)

    def test_tensor_indexes(self):
        with gdunlock.Checkpoint(SMALL) as c:
            self.assertEqual(c.tensor(-1), c.tensor(len(c) - 1))
            for bad in (99, len(c), -len(c) - 1, 2**64):
                with self.assertRaisesRegex(IndexError, "tensor index .* out of range"):
                    c.tensor(bad)
                with self.assertRaises(IndexError):
                    c.dlpack(bad)
            with self.assertRaises(TypeError):
                c.tensor("0")


if __name__ == "__main__":
    unittest.main()
