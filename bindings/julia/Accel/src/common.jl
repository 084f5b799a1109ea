# capi/accel/common.h: error codes (raw.jl's ACCEL_ERR_* constants), the last error message, strings handed
# to the caller.

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
error_name(code::Integer) = unsafe_string(accel_error_name(code))

"""The message of the last failed accel call on this thread; "" when none has failed."""
error_last() = unsafe_string(accel_error_last())

# Read on the thread of the failed call, before anything else calls the library (the message is
# thread-local and lives until the next accel call there).
function throw_last_error(code::Cint)
    message = error_last()
    throw(AccelError(code, error_name(code), message))
end

"""
    @check accel_...(...)

Runs a fallible call of the raw layer (returning `ACCEL_OK` or an `ACCEL_ERR_*` code) and throws its
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
    accel_string_free(text)
    return copy
end
