"""What the loaded libaccel is: its version, the LibTorch it was built against, its compiled-in features."""
from ._library import ffi, lib


def version():
    """"MAJOR.MINOR.PATCH" of the loaded library."""
    return ffi.string(lib.accel_version_string()).decode()


def version_tuple():
    return (lib.accel_version_major(), lib.accel_version_minor(), lib.accel_version_patch())


def torch_version():
    """The LibTorch version the library was built against (not necessarily the Python torch's)."""
    return ffi.string(lib.accel_version_torch()).decode()


def features():
    """The compiled-in features, e.g. ["gloo"]."""
    listed = ffi.string(lib.accel_version_features()).decode()
    return [name for name in listed.split(",") if name]


def has_feature(name):
    """Whether "gloo", "nccl", "cuda" or "mpi" is compiled in."""
    return bool(lib.accel_version_has_feature(name.encode()))
