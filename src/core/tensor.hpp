// Tensors crossing the C ABI: DLPack in and out without copying, plain buffers in with a copy.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "core/dtype.hpp"  // the ACCEL_DTYPE_* codes tensor_from_buffer takes

struct DLManagedTensor;

namespace accel {

// Wraps managed without copying; on success the tensor owns it (its deleter runs when the memory dies, on a
// thread in a call into the library: core/lent_memory.hpp).
// Throws Error(InvalidArgument) for a malformed struct, Error(Dtype) for an unsupported element type,
// Error(Unsupported) for a device this build lacks; on a throw ownership stays with the caller.
at::Tensor tensor_from_dlpack(DLManagedTensor* managed);

// Shares the tensor's memory; the caller must run the result's deleter once.
DLManagedTensor* tensor_to_dlpack(const at::Tensor& tensor);

// Copies C-contiguous data of the given ACCEL_DTYPE_* code.
at::Tensor tensor_from_buffer(const void* data, int32_t dtype_code, const int64_t* shape, size_t ndim);

// The memory of a contiguous CPU tensor. Throws Error(InvalidArgument) for another device or layout.
void* cpu_data_pointer(const at::Tensor& tensor);

// Copies the elements in C order into dst of capacity bytes (from any device). Throws Error(InvalidArgument)
// when capacity is too small.
void copy_to_buffer(const at::Tensor& tensor, void* dst, size_t capacity);


constexpr size_t kMaxTensorDims = 64;

}  // namespace accel
