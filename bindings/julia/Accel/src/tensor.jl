# capi/accel/tensor.h: tensor handles, and copies between them and Julia arrays (zero-copy: dlpack.jl).
#
# Thread safety (tensor.h): a tensor may be read from several threads; writes to its data must not race.

"""The Julia element types that cross the ABI (bfloat16 has none)."""
const Element = Union{Float32,Float64,Float16,Int8,Int16,Int32,Int64,UInt8,Bool}

const DTYPE_CODES = Dict{DataType,Int32}(
    Float32 => ACCEL_DTYPE_FLOAT32, Float64 => ACCEL_DTYPE_FLOAT64, Float16 => ACCEL_DTYPE_FLOAT16,
    Int8 => ACCEL_DTYPE_INT8, Int16 => ACCEL_DTYPE_INT16, Int32 => ACCEL_DTYPE_INT32,
    Int64 => ACCEL_DTYPE_INT64, UInt8 => ACCEL_DTYPE_UINT8, Bool => ACCEL_DTYPE_BOOL)

const DTYPE_NAMES = Dict{Int32,Symbol}(
    ACCEL_DTYPE_FLOAT32 => :float32, ACCEL_DTYPE_FLOAT64 => :float64, ACCEL_DTYPE_FLOAT16 => :float16,
    ACCEL_DTYPE_BFLOAT16 => :bfloat16, ACCEL_DTYPE_INT8 => :int8, ACCEL_DTYPE_INT16 => :int16,
    ACCEL_DTYPE_INT32 => :int32, ACCEL_DTYPE_INT64 => :int64, ACCEL_DTYPE_UINT8 => :uint8,
    ACCEL_DTYPE_BOOL => :bool)

"""
    Tensor(array)

A CPU tensor holding a copy of `array`, with its shape and indexing: element [i, j] of the tensor is
`array[i, j]` (Julia stores columns first, the library rows first: the copy reorders). Handles made
from one another (a batch's fields, a model's parameters) may share memory.
"""
mutable struct Tensor
    ptr::Ptr{accel_tensor_t}
end

Base.unsafe_convert(::Type{Ptr{accel_tensor_t}}, tensor::Tensor) = live_pointer(tensor)

Base.close(tensor::Tensor) = release!(tensor) do ptr
    accel_tensor_free(ptr)
end

"""Takes ownership of a tensor handle the library made."""
owned_tensor(ptr::Ptr{accel_tensor_t}) = finalizer(close, Tensor(ptr))

"""Runs a raw call that writes a new tensor handle to its out-parameter; the tensor."""
new_tensor(call) = owned_tensor(new_pointer(call, accel_tensor_t))

"""The elements of `array` in C (row-major) order."""
function row_major(array::AbstractArray{T}) where {T}
    ordered = ndims(array) <= 1 ? array : permutedims(array, ndims(array):-1:1)
    return Vector{T}(vec(ordered))
end

function Tensor(array::AbstractArray{T}) where {T<:Element}
    shape = Int64[size(array)...]
    data = row_major(array)
    return new_tensor() do out
        accel_tensor_from_buffer(out, data, DTYPE_CODES[T], shape, length(shape))
    end
end

"""A 0-dimensional tensor holding `value`."""
Tensor(value::Element) = Tensor(fill(value))

Base.ndims(tensor::Tensor) = Int(accel_tensor_ndim(tensor))

function Base.size(tensor::Tensor)
    rank = ndims(tensor)
    # The sizes belong to the handle: read them while it is certainly alive.
    return GC.@preserve tensor begin
        sizes = accel_tensor_shape(tensor)
        ntuple(i -> Int(unsafe_load(sizes, i)), rank)
    end
end

Base.length(tensor::Tensor) = Int(accel_tensor_numel(tensor))

"""`:float32`, `:int64`, ... (`:unknown` for a type without an ACCEL_DTYPE_* constant)."""
dtype(tensor::Tensor) = get(DTYPE_NAMES, accel_tensor_dtype(tensor), :unknown)

"""The Julia type of the elements; an error for bfloat16."""
function Base.eltype(tensor::Tensor)
    code = accel_tensor_dtype(tensor)
    for (type, type_code) in DTYPE_CODES
        type_code == code && return type
    end
    throw(AccelError(ACCEL_ERR_DTYPE, error_name(ACCEL_ERR_DTYPE), "no Julia element type for a $(dtype(tensor)) tensor"))
end

"""Bytes of one element."""
element_size(tensor::Tensor) = Int(accel_tensor_element_size(tensor))

"""The tensor's device: "cpu" or "cuda:<n>"."""
device(tensor::Tensor) = unsafe_string(accel_tensor_device(tensor))

"""The address of a contiguous CPU tensor's memory, valid while the handle (or a DLPack export) lives."""
function Base.pointer(tensor::Tensor)
    data = Ref{Ptr{Cvoid}}(C_NULL)
    @check accel_tensor_data(tensor, data)
    return data[]
end

"""
    Array(tensor)

A copy of the elements (from any device) as a Julia array of the tensor's shape and indexing.
"""
function Base.Array(tensor::Tensor)
    T = eltype(tensor)
    shape = size(tensor)
    data = Vector{T}(undef, prod(shape))
    @check accel_tensor_copy_to_buffer(tensor, data, sizeof(data))
    length(shape) <= 1 && return reshape(data, shape)
    return permutedims(reshape(data, reverse(shape)), length(shape):-1:1)
end
