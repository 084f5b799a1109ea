"""Finds libaccel and opens it with cffi in ABI mode: `ffi` and `lib` for the rest of the package.

Search order: the ACCEL_LIBRARY environment variable (a path; an error if it cannot be opened, never a
silent fall-back to another copy), then libaccel.so.0 / libaccel.so next to this package (where `pip install
bindings/python` bundles the library it was built with), then the system's library path
(ctypes.util.find_library, else the SONAME). The library is opened with RTLD_LOCAL so that its symbols
(and the LibTorch it links) never interpose on those of a torch the process has loaded itself, and with
RTLD_NODELETE so that it stays mapped when Python tears the module down at exit: torch tensors that share
its memory (a gradient bucket installed as a parameter's .grad) call its DLPack deleter when they die,
which may be after the module is gone (it was a segmentation fault at exit).
"""
import ctypes.util
import os

import cffi

from ._cdefs import CDEF

SONAME = "libaccel.so.0"

ffi = cffi.FFI()
ffi.cdef(CDEF)


def _candidates():
    """(where, what to dlopen) in search order."""
    explicit = os.environ.get("ACCEL_LIBRARY")
    if explicit:
        return [("ACCEL_LIBRARY", explicit)]
    here = os.path.dirname(os.path.abspath(__file__))
    found = [("next to the package", os.path.join(here, name)) for name in (SONAME, "libaccel.so")]
    found = [(where, path) for where, path in found if os.path.exists(path)]
    found.append(("the system library path", ctypes.util.find_library("accel") or SONAME))
    return found


def _open():
    failures = []
    for where, name in _candidates():
        try:
            return name, ffi.dlopen(name, ffi.RTLD_NOW | ffi.RTLD_LOCAL | ffi.RTLD_NODELETE)
        except OSError as error:
            failures.append(f"{name} ({where}): {error}")
    raise ImportError("cannot load libaccel; tried " + "; ".join(failures) +
                      ". Set ACCEL_LIBRARY to the path of libaccel.so")


path, lib = _open()

# The declarations above are those of ACCEL_VERSION_MAJOR.MINOR: a library of another major version has
# another ABI, and an older minor version may lack functions declared here.
_loaded = (lib.accel_version_major(), lib.accel_version_minor())
if _loaded[0] != lib.ACCEL_VERSION_MAJOR or _loaded[1] < lib.ACCEL_VERSION_MINOR:
    raise ImportError(f"{path} is libaccel {ffi.string(lib.accel_version_string()).decode()}; this binding needs "
                      f"{lib.ACCEL_VERSION_MAJOR}.x with x >= {lib.ACCEL_VERSION_MINOR}")
