# capi/accel/version.h: the version of the library loaded at run time and what it was built with.

# The version of the headers this package was written for.
const ACCEL_VERSION_MAJOR = 0
const ACCEL_VERSION_MINOR = 2
const ACCEL_VERSION_PATCH = 0

"""(major, minor, patch) of the loaded library."""
function version_numbers()
    major = ccall((:accel_version_major, libaccel), Cint, ())
    minor = ccall((:accel_version_minor, libaccel), Cint, ())
    patch = ccall((:accel_version_patch, libaccel), Cint, ())
    return (Int(major), Int(minor), Int(patch))
end

"""The loaded library's version, e.g. v"0.2.0"."""
library_version() = VersionNumber(unsafe_string(ccall((:accel_version_string, libaccel), Cstring, ())))

"""The LibTorch version the library was built against, e.g. "1.13.0"."""
torch_version() = unsafe_string(ccall((:accel_version_torch, libaccel), Cstring, ()))

"""Whether a feature ("gloo", "nccl", "cuda", "mpi") was compiled in."""
has_feature(name::AbstractString) = ccall((:accel_version_has_feature, libaccel), Cint, (Cstring,), name) == 1

"""The compiled-in features, e.g. ["gloo"]."""
function features()
    list = unsafe_string(ccall((:accel_version_features, libaccel), Cstring, ()))
    return String[feature for feature in split(list, ',') if !isempty(feature)]
end

"""
Refuses a library older than the headers this package was written for: a function it lacks would fail
only when first called. (A library of another major version has another SONAME and is not found.)
"""
function check_library_version()
    major, minor, _ = version_numbers()
    if major != ACCEL_VERSION_MAJOR || minor < ACCEL_VERSION_MINOR
        error("libaccel $(library_version()) is loaded; Accel.jl needs $(ACCEL_VERSION_MAJOR).$(ACCEL_VERSION_MINOR) or a later $(ACCEL_VERSION_MAJOR).x")
    end
end
