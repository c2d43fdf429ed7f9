"""Packs the built shared library into the package (gdunlock/_native/),
with the libraries it links that the build bundled next to it, so that an
installed gdunlock works without the source tree. The library is taken from
$GDUNLOCK_BUILD/lib, $BUILD/lib or ../build/lib (build it first:
cmake -S . -B build && cmake --build build); without one the package still
installs and looks for the library at run time (see gdunlock/_lib.py)."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "libgdunlock-load.so"


def built_library():
    for build in (os.environ.get("GDUNLOCK_BUILD"), os.environ.get("BUILD"),
                  os.path.join(HERE, "..", "build")):
        if build and os.path.isfile(os.path.join(build, "lib", LIBRARY)):
            return os.path.join(build, "lib")
    return None


class BuildWithNative(build_py):
    def run(self):
        super().run()
        lib = built_library()
        if lib is None:
            print(f"gdunlock: no built {LIBRARY} found; the package will look for it at run time")
            return
        dest = os.path.join(self.build_lib, "gdunlock", "_native")
        os.makedirs(dest, exist_ok=True)
        # The library and the bundled jansson it links ($ORIGIN run path).
        for path in [os.path.join(lib, LIBRARY)] + glob.glob(os.path.join(lib, "libjansson.so*")):
            shutil.copy2(path, dest)
        print(f"gdunlock: packed {lib}/{LIBRARY} into the package")


setup(cmdclass={"build_py": BuildWithNative})
