# capi/accel/collectives.h: collectives across the processes of a state. Every rank calls the same ones
# in the same order; with one process they work locally.

"""Opaque C type `accel_bytes_list_t`, only pointed to."""
mutable struct accel_bytes_list_t end

"""Every rank's tensor concatenated along dim 0 (the first dimension), in rank order; row counts may differ
between ranks (no padding needed), the other sizes may not."""
function gather(state::State, input::Tensor)
    return new_tensor() do out
        ccall((:accel_state_gather, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}, Ptr{Ptr{accel_tensor_t}}), state, input, out)
    end
end

"""Every rank's bytes (any lengths, 0 included), in rank order."""
function gather_bytes(state::State, data::AbstractVector{UInt8})
    bytes = Vector{UInt8}(data)
    list = new_pointer(accel_bytes_list_t) do out
        ccall((:accel_state_gather_bytes, libaccel), Cint, (Ptr{accel_state_t}, Ptr{Cvoid}, Csize_t, Ptr{Ptr{accel_bytes_list_t}}),
            state, bytes, length(bytes), out)
    end
    try
        count = ccall((:accel_bytes_list_count, libaccel), Csize_t, (Ptr{accel_bytes_list_t},), list)
        return [bytes_list_entry(list, index) for index in 0:Int(count)-1]
    finally
        ccall((:accel_bytes_list_free, libaccel), Cvoid, (Ptr{accel_bytes_list_t},), list)
    end
end

gather_bytes(state::State, text::AbstractString) = gather_bytes(state, Vector{UInt8}(codeunits(text)))

function bytes_list_entry(list::Ptr{accel_bytes_list_t}, index::Integer)
    data = Ref{Ptr{Cvoid}}(C_NULL)
    size = Ref{Csize_t}(0)
    @check ccall((:accel_bytes_list_get, libaccel), Cint, (Ptr{accel_bytes_list_t}, Csize_t, Ptr{Ptr{Cvoid}}, Ptr{Csize_t}), list, index, data, size)
    return size[] == 0 ? UInt8[] : copy(unsafe_wrap(Array, Ptr{UInt8}(data[]), Int(size[])))
end

"""
    reduce_across(state, tensor, reduction = :sum)

The element-wise reduction over the ranks: `:sum`, `:mean` (floating types) or `:max`.
"""
function reduce_across(state::State, input::Tensor, reduction::Symbol = :sum)
    return new_tensor() do out
        ccall((:accel_state_reduce, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}, Cstring, Ptr{Ptr{accel_tensor_t}}),
            state, input, String(reduction), out)
    end
end

"""
    reduce_named(state, pairs, reduction = :sum)

`reduce_across` over many tensors at once, as Accelerate reduces a nested structure: `pairs` are
`name => tensor` (a name is the tensor's path, unique); one exchange of names, shapes and dtypes, then one
all-reduce per dtype. Returns the reduced tensors in the order of `pairs`.
"""
function reduce_named(state::State, pairs::AbstractVector{<:Pair}, reduction::Symbol = :sum)
    inputs = Tensor[as_tensor(last(pair)) for pair in pairs]
    outputs = fill(Ptr{accel_tensor_t}(C_NULL), length(inputs))
    pointers = handle_pointers(accel_tensor_t, inputs)
    GC.@preserve inputs begin
        with_cstrings(String[string(first(pair)) for pair in pairs]) do names
            @check ccall((:accel_state_reduce_named, libaccel), Cint,
                (Ptr{accel_state_t}, Ptr{Ptr{UInt8}}, Ptr{Ptr{accel_tensor_t}}, Csize_t, Cstring, Ptr{Ptr{accel_tensor_t}}),
                state, names, pointers, length(inputs), String(reduction), outputs)
        end
    end
    return Tensor[owned_tensor(output) for output in outputs]
end

"""Overwrites `tensor` on every rank with rank `from_process`'s values, in place (Accelerate's broadcast)."""
function broadcast_from!(state::State, tensor::Tensor, from_process::Integer)
    @check ccall((:accel_state_broadcast, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}, Int32), state, tensor, from_process)
    return tensor
end

"""
    reduce_scatter!(state, output, input, reduction = :sum)

Writes into `output`, in place, this rank's share of the element-wise `:sum` or `:mean` of every rank's
`input` (PyTorch's reduce_scatter_tensor): with n elements in `output`, elements `rank * n + 1` to
`(rank + 1) * n` of the reduction, in C (row-major) order. Returns `output`.
"""
function reduce_scatter!(state::State, output::Tensor, input::Tensor, reduction::Symbol = :sum)
    @check ccall((:accel_state_reduce_scatter, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}, Cstring, Ptr{accel_tensor_t}),
        state, input, String(reduction), output)
    return output
end

"""
    all_gather!(state, output, input)

Writes into `output`, in place, every rank's `input` in rank order (PyTorch's all_gather_into_tensor): `output`
has `input`'s element type and `num_processes(state)` times its elements. Returns `output`.
"""
function all_gather!(state::State, output::Tensor, input::Tensor)
    @check ccall((:accel_state_all_gather, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}, Ptr{accel_tensor_t}),
        state, input, output)
    return output
end

"""
    pad_across_processes(state, tensor; dim = 1, pad_value = 0, pad_first = false)

Pads dimension `dim` (1-based; negative counts from the end, -1 the last) to the largest size any rank
has there, with `pad_value`, at the end or, with `pad_first`, at the start.
"""
function pad_across_processes(state::State, input::Tensor; dim::Integer = 1, pad_value::Real = 0, pad_first::Bool = false)
    c_dim = dim > 0 ? dim - 1 : dim
    return new_tensor() do out
        ccall((:accel_state_pad_across_processes, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}, Int64, Cdouble, Cint, Ptr{Ptr{accel_tensor_t}}),
            state, input, c_dim, pad_value, pad_first, out)
    end
end

"""`gather`, without the samples that padded the last global batch of the active loader."""
function gather_for_metrics(state::State, input::Tensor)
    return new_tensor() do out
        ccall((:accel_state_gather_for_metrics, libaccel), Cint, (Ptr{accel_state_t}, Ptr{accel_tensor_t}, Ptr{Ptr{accel_tensor_t}}), state, input, out)
    end
end
