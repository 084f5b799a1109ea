# capi/accel/common.h: error codes, the last error message, strings handed to the caller.

# Codes of failed calls, pinned forever by the C ABI.
const ACCEL_OK = Cint(0)
const ACCEL_ERR_INVALID_ARGUMENT = Cint(-1)
const ACCEL_ERR_NULL_ARGUMENT = Cint(-2)
const ACCEL_ERR_UNKNOWN_OPTION = Cint(-3)
const ACCEL_ERR_BAD_OPTION_VALUE = Cint(-4)
const ACCEL_ERR_DTYPE = Cint(-5)
const ACCEL_ERR_SHAPE_MISMATCH = Cint(-6)
const ACCEL_ERR_TIMEOUT = Cint(-7)
const ACCEL_ERR_PEER_FAILED = Cint(-8)
const ACCEL_ERR_INVALID_STATE = Cint(-9)
const ACCEL_ERR_ENVIRONMENT = Cint(-10)
const ACCEL_ERR_IO = Cint(-11)
const ACCEL_ERR_CALLBACK = Cint(-12)
const ACCEL_ERR_UNSUPPORTED = Cint(-13)
const ACCEL_ERR_OUT_OF_RANGE = Cint(-14)
const ACCEL_ERR_TORCH = Cint(-15)
const ACCEL_ERR_OUT_OF_MEMORY = Cint(-16)
const ACCEL_ERR_INTERNAL = Cint(-17)

"""
    AccelError(code, name, message)

A failed accel call: `code` is one of the `ACCEL_ERR_*` constants, `name` its symbolic name
("ACCEL_ERR_TIMEOUT") and `message` what the library said (`accel_error_last`).
"""
struct AccelError <: Exception
    code::Cint
    name::String
    message::String
end

Base.showerror(io::IO, error::AccelError) = print(io, error.name, ": ", error.message)

"""The symbolic name of an error code ("ACCEL_ERR_UNKNOWN_CODE" for others)."""
error_name(code::Integer) = unsafe_string(ccall((:accel_error_name, libaccel), Cstring, (Cint,), code))

"""The message of the last failed accel call on this thread; "" when none has failed."""
error_last() = unsafe_string(ccall((:accel_error_last, libaccel), Cstring, ()))

# Read on the thread of the failed call, before anything else calls the library (the message is
# thread-local and lives until the next accel call there).
function throw_last_error(code::Cint)
    message = error_last()
    throw(AccelError(code, error_name(code), message))
end

"""
    @check ccall(...)

Runs a fallible ccall (returning `ACCEL_OK` or an `ACCEL_ERR_*` code) and throws its
[`AccelError`](@ref) when it fails.
"""
macro check(call)
    return quote
        local code = $(esc(call))
        code == ACCEL_OK || throw_last_error(code)
        nothing
    end
end

"""A copy of a string the library returned; `nothing` for NULL."""
function string_or_nothing(text::Cstring)
    return Ptr{UInt8}(text) == C_NULL ? nothing : unsafe_string(text)
end

"""A copy of a string the library handed over (`accel_options_dump`), which is then released."""
function take_string(text::Ptr{UInt8})
    copy = unsafe_string(text)
    ccall((:accel_string_free, libaccel), Cvoid, (Ptr{UInt8},), text)
    return copy
end
