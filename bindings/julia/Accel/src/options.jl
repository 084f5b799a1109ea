# capi/accel/options.h: the key/value settings handed to constructors (keys and defaults in the header).

"""
    Options(; key = value, ...)

An options object. `Options(batch_size = 32, shuffle = true)` sets each key through the setter of its
Julia type: Bool, Integer, AbstractFloat, or a String parsed by the key's type ("bf16", "30").
"""
mutable struct Options
    ptr::Ptr{accel_options_t}
end

Base.unsafe_convert(::Type{Ptr{accel_options_t}}, options::Options) = live_pointer(options)

Base.close(options::Options) = release!(options) do ptr
    accel_options_free(ptr)
end

function Options(; settings...)
    ptr = new_pointer(accel_options_t) do out
        accel_options_new(out)
    end
    options = finalizer(close, Options(ptr))
    for (key, value) in settings
        set!(options, String(key), value)
    end
    return options
end

"""
    set!(options, key, value)

Sets a key: Bool, Integer and AbstractFloat values through the typed setters, a string in its text form
(`accel_options_set`, parsed by the key's type). Returns the options.
"""
function set!(options::Options, key::AbstractString, value::Bool)
    @check accel_options_set_bool(options, key, value)
    return options
end

function set!(options::Options, key::AbstractString, value::Integer)
    @check accel_options_set_int(options, key, value)
    return options
end

function set!(options::Options, key::AbstractString, value::AbstractFloat)
    @check accel_options_set_double(options, key, value)
    return options
end

function set!(options::Options, key::AbstractString, value::AbstractString)
    @check accel_options_set(options, key, value)
    return options
end

"""
    set!(options, key, value::Symbol)

Sets a string-typed key (`mixed_precision`, `backend`, `no_decay`, ...) to exactly this text, without
parsing it as another type.
"""
function set!(options::Options, key::AbstractString, value::Symbol)
    @check accel_options_set_string(options, key, String(value))
    return options
end

"""
    dump_options(options)

The configuration the options resolve to now: one "key=value (source)" line per key.
"""
function dump_options(options::Options)
    text = Ref{Ptr{UInt8}}(C_NULL)
    @check accel_options_dump(options, text)
    return take_string(text[])
end

"""The pointer of optional options: NULL means the defaults (and ACCEL_* variables for state keys)."""
options_pointer(options::Options) = live_pointer(options)
options_pointer(::Nothing) = Ptr{accel_options_t}(C_NULL)
