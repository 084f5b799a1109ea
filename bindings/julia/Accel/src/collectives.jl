# capi/accel/collectives.h: collectives across the processes of a state. Every rank calls the same ones
# in the same order; with one process they work locally.

"""Every rank's tensor concatenated along dim 0 (the first dimension), in rank order; row counts may differ
between ranks (no padding needed), the other sizes may not."""
function gather(state::State, input::Tensor)
    return new_tensor() do out
        accel_state_gather(state, input, out)
    end
end

"""Every rank's bytes (any lengths, 0 included), in rank order."""
function gather_bytes(state::State, data::AbstractVector{UInt8})
    bytes = Vector{UInt8}(data)
    list = new_pointer(accel_bytes_list_t) do out
        accel_state_gather_bytes(state, bytes, length(bytes), out)
    end
    try
        count = accel_bytes_list_count(list)
        return [bytes_list_entry(list, index) for index in 0:Int(count)-1]
    finally
        accel_bytes_list_free(list)
    end
end

gather_bytes(state::State, text::AbstractString) = gather_bytes(state, Vector{UInt8}(codeunits(text)))

function bytes_list_entry(list::Ptr{accel_bytes_list_t}, index::Integer)
    data = Ref{Ptr{Cvoid}}(C_NULL)
    size = Ref{Csize_t}(0)
    @check accel_bytes_list_get(list, index, data, size)
    return size[] == 0 ? UInt8[] : copy(unsafe_wrap(Array, Ptr{UInt8}(data[]), Int(size[])))
end

"""
    reduce_across(state, tensor, reduction = :sum)

The element-wise reduction over the ranks: `:sum`, `:mean` (floating types) or `:max`.
"""
function reduce_across(state::State, input::Tensor, reduction::Symbol = :sum)
    return new_tensor() do out
        accel_state_reduce(state, input, String(reduction), out)
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
            @check accel_state_reduce_named(state, names, pointers, length(inputs), String(reduction), outputs)
        end
    end
    return Tensor[owned_tensor(output) for output in outputs]
end

"""Overwrites `tensor` on every rank with rank `from_process`'s values, in place (Accelerate's broadcast)."""
function broadcast_from!(state::State, tensor::Tensor, from_process::Integer)
    @check accel_state_broadcast(state, tensor, from_process)
    return tensor
end

"""
    reduce_scatter!(state, output, input, reduction = :sum)

Writes into `output`, in place, this rank's share of the element-wise `:sum` or `:mean` of every rank's
`input` (PyTorch's reduce_scatter_tensor): with n elements in `output`, elements `rank * n + 1` to
`(rank + 1) * n` of the reduction, in C (row-major) order. Returns `output`.
"""
function reduce_scatter!(state::State, output::Tensor, input::Tensor, reduction::Symbol = :sum)
    @check accel_state_reduce_scatter(state, input, String(reduction), output)
    return output
end

"""
    all_gather!(state, output, input)

Writes into `output`, in place, every rank's `input` in rank order (PyTorch's all_gather_into_tensor): `output`
has `input`'s element type and `num_processes(state)` times its elements. Returns `output`.
"""
function all_gather!(state::State, output::Tensor, input::Tensor)
    @check accel_state_all_gather(state, input, output)
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
        accel_state_pad_across_processes(state, input, c_dim, pad_value, pad_first, out)
    end
end

"""`gather`, without the samples that padded the last global batch of the active loader."""
function gather_for_metrics(state::State, input::Tensor)
    return new_tensor() do out
        accel_state_gather_for_metrics(state, input, out)
    end
end
