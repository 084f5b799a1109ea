# Zero-copy exchange through DLPack (version 0.6, LibTorch 1.13's), whose structs capi/accel/tensor.h only
# forward-declares. Out: `unsafe_array` shows a tensor's memory as a Julia array; `to_dlpack` hands a
# DLManagedTensor to another framework. In: `from_dlpack` takes one another framework made. Julia arrays
# are not lent to the library: it may call a DLPack deleter from one of its own threads, where Julia code
# cannot run before Julia 1.9. The structs are in dlpack_structs.jl.

const DLPACK_TYPES = Dict{Tuple{UInt8,UInt8},DataType}(
    (2, 16) => Float16, (2, 32) => Float32, (2, 64) => Float64,
    (0, 8) => Int8, (0, 16) => Int16, (0, 32) => Int32, (0, 64) => Int64,
    (1, 8) => UInt8, (6, 8) => Bool)

"""
    to_dlpack(tensor) -> Ptr{DLManagedTensor}

Exports the tensor without copying. The caller owns the result: hand it to a framework that takes DLPack
tensors, or call its deleter once ([`delete_dlpack`](@ref)). Bool tensors cannot be exported (LibTorch 1.13).
"""
function to_dlpack(tensor::Tensor)
    out = Ref{Ptr{DLManagedTensor}}(C_NULL)
    @check accel_tensor_to_dlpack(out, tensor)
    return out[]
end

"""
    from_dlpack(managed::Ptr{DLManagedTensor}) -> Tensor

Wraps a DLPack tensor another framework produced, without copying. On success the tensor owns it (and
calls its deleter when the memory is no longer used); on failure it stays the caller's.
"""
function from_dlpack(managed::Ptr{DLManagedTensor})
    return new_tensor() do out
        accel_tensor_from_dlpack(out, managed)
    end
end

"""Calls a DLPack tensor's deleter: what its owner does once, when done with it."""
function delete_dlpack(managed::Ptr{DLManagedTensor})
    deleter = unsafe_load(managed).deleter
    deleter == C_NULL || ccall(deleter, Cvoid, (Ptr{DLManagedTensor},), managed)
    return nothing
end

"""Whether strides walk `shape` in C order without gaps (a dimension of size 1 may have any stride)."""
function is_row_major(shape::Vector{Int64}, strides::Vector{Int64})
    expected = 1
    for dim in length(shape):-1:1
        shape[dim] > 1 && strides[dim] != expected && return false
        expected *= shape[dim]
    end
    return true
end

"""
    unsafe_array(tensor) -> AbstractArray

The memory of a CPU tensor as a Julia array, without copying, indexed as the tensor (for two or more
dimensions a PermutedDimsArray over the row-major memory). The memory stays valid while the array lives;
unsafe because the library may write it meanwhile (a model's parameters during a step, a broadcast).
"""
function unsafe_array(tensor::Tensor)
    managed = to_dlpack(tensor)
    described = unsafe_load(managed).dl_tensor
    rank = Int(described.ndim)
    shape = Int64[unsafe_load(described.shape, i) for i in 1:rank]
    strides = described.strides == C_NULL ? Int64[] : Int64[unsafe_load(described.strides, i) for i in 1:rank]
    T = get(DLPACK_TYPES, (described.dtype.code, described.dtype.bits), nothing)
    if described.device.device_type != kDLCPU || T === nothing || described.dtype.lanes != 1 ||
       !(isempty(strides) || is_row_major(shape, strides))
        delete_dlpack(managed)
        throw(ArgumentError("unsafe_array needs a compact CPU tensor of a Julia element type, not $(dtype(tensor)) on $(device(tensor))"))
    end
    memory = unsafe_wrap(Array, Ptr{T}(described.data + described.byte_offset), Tuple(reverse(shape)); own = false)
    finalizer(_ -> delete_dlpack(managed), memory)
    return rank <= 1 ? memory : PermutedDimsArray(memory, rank:-1:1)
end
