# The DLPack structs (version 0.6, LibTorch 1.13's) that capi/accel/tensor.h only forward-declares, written
# by hand (DLPack is not accel's ABI, so capi/gen does not generate them). Included before raw.jl, whose
# ccalls name DLManagedTensor: Julia resolves a ccall's types when the method is defined.

struct DLDevice
    device_type::Cint
    device_id::Cint
end

struct DLDataType
    code::UInt8
    bits::UInt8
    lanes::UInt16
end

struct DLTensor
    data::Ptr{Cvoid}
    device::DLDevice
    ndim::Cint
    dtype::DLDataType
    shape::Ptr{Int64}
    strides::Ptr{Int64}  # in elements; NULL means compact and row-major
    byte_offset::UInt64
end

struct DLManagedTensor
    dl_tensor::DLTensor
    manager_ctx::Ptr{Cvoid}
    deleter::Ptr{Cvoid}
end

const kDLCPU = Cint(1)
