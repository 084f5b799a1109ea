# What every wrapper of a library handle shares. A wrapper is a mutable struct with a `ptr` field: its
# finalizer only frees the handle (the C ABI keeps parents alive, so finalizers may run in any order, and
# *_free never communicates); `close` frees it earlier. Passed to a raw call, a wrapper gives its pointer
# (Base.unsafe_convert) and stays rooted for the call.

"""Calls `free` once on the handle's pointer and forgets it; a closed handle is left alone."""
function release!(free, handle)
    ptr = handle.ptr
    handle.ptr = C_NULL
    ptr == C_NULL || free(ptr)
    return nothing
end

"""The live pointer of a handle, or an error naming the closed wrapper."""
function live_pointer(handle)
    handle.ptr == C_NULL && throw(ArgumentError("this $(typeof(handle)) is closed"))
    return handle.ptr
end

"""Runs a constructor's raw call with an out-parameter of type Ptr{T}; the new pointer when it succeeded."""
function new_pointer(call, ::Type{T}) where {T}
    out = Ref{Ptr{T}}(C_NULL)
    @check call(out)
    return out[]
end

"""The pointers of handles, as the C arrays `accel_x_t *const *` read; keep `handles` preserved while used."""
handle_pointers(::Type{T}, handles) where {T} = Ptr{T}[live_pointer(handle) for handle in handles]

"""
Calls `body(pointers)` with NUL-terminated pointers to `strings` (the C arrays `const char *const *`),
refusing a string with a NUL byte as a C function would see it cut.
"""
function with_cstrings(body, strings)
    strings = String[string(text) for text in strings]
    for text in strings
        occursin('\0', text) && throw(ArgumentError("a string passed to accel contains a NUL byte: $(repr(text))"))
    end
    return GC.@preserve strings body(Ptr{UInt8}[pointer(text) for text in strings])
end

"""`nothing` as a NULL `const char *`, a string as itself."""
nullable_cstring(text::Nothing) = Cstring(C_NULL)
nullable_cstring(text::AbstractString) = String(text)
