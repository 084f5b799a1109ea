# capi/accel/version.h: the version of the library loaded at run time and what it was built with.

# The version of the headers this package was written for: raw.jl's ACCEL_VERSION_* constants.

"""(major, minor, patch) of the loaded library."""
function version_numbers()
    major = accel_version_major()
    minor = accel_version_minor()
    patch = accel_version_patch()
    return (Int(major), Int(minor), Int(patch))
end

"""The loaded library's version, e.g. v"0.2.0"."""
library_version() = VersionNumber(unsafe_string(accel_version_string()))

"""The LibTorch version the library was built against, e.g. "1.13.0"."""
torch_version() = unsafe_string(accel_version_torch())

"""Whether a feature ("gloo", "nccl", "cuda", "mpi") was compiled in."""
has_feature(name::AbstractString) = accel_version_has_feature(name) == 1

"""The compiled-in features, e.g. ["gloo"]."""
function features()
    list = unsafe_string(accel_version_features())
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
