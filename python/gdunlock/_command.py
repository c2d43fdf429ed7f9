"""The `gdunlock` command that pip installs: it becomes the gdunlock binary
installed inside this package (gdunlock/_native/bin/gdunlock, found as
_lib.native_path says, editable installs too), which finds the shim beside it
(gdunlock/_native/lib/libgdunlock.so) for `gdunlock run`."""
import os
import sys

from ._lib import native_path


def main():
    exe = native_path("bin", "gdunlock")
    try:
        os.execv(exe, ["gdunlock"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"gdunlock: cannot run {exe}: {e.strerror}; this installation lacks its "
                         f"binary: reinstall it (pip install --force-reinstall gdunlock)\n")
        return 70
