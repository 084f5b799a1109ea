#include "accel/tensor.h"

#include <cstring>

#include "core/tensor.hpp"
#include "shim/guard.hpp"
#include "shim/handles.hpp"

using accel::capi::guarded;
using accel::capi::guarded_out;
using accel::capi::require;

static_assert(ACCEL_TENSOR_MAX_DIMS == accel::kMaxTensorDims);

extern "C" int accel_tensor_from_dlpack(accel_tensor_t** out, struct DLManagedTensor* managed) {
  return guarded_out(__func__, out, [&] {
    require(managed, "managed");
    *out = new accel_tensor(accel::tensor_from_dlpack(managed));
  });
}

extern "C" int accel_tensor_to_dlpack(const accel_tensor_t* tensor, struct DLManagedTensor** out) {
  return guarded_out(__func__, out, [&] {
    require(tensor, "tensor");
    *out = accel::tensor_to_dlpack(tensor->tensor);
  });
}

extern "C" int accel_tensor_from_buffer(accel_tensor_t** out, const void* data, int32_t dtype, const int64_t* shape,
                                        size_t ndim) {
  return guarded_out(__func__, out, [&] { *out = new accel_tensor(accel::tensor_from_buffer(data, dtype, shape, ndim)); });
}

extern "C" void accel_tensor_free(accel_tensor_t* tensor) { delete tensor; }

extern "C" size_t accel_tensor_ndim(const accel_tensor_t* tensor) { return tensor ? tensor->shape.size() : 0; }
extern "C" const int64_t* accel_tensor_shape(const accel_tensor_t* tensor) {
  return tensor ? tensor->shape.data() : nullptr;
}
extern "C" int64_t accel_tensor_numel(const accel_tensor_t* tensor) { return tensor ? tensor->tensor.numel() : 0; }
extern "C" int32_t accel_tensor_dtype(const accel_tensor_t* tensor) {
  return tensor ? accel::dtype_code(tensor->tensor.scalar_type()) : 0;
}
extern "C" size_t accel_tensor_element_size(const accel_tensor_t* tensor) {
  return tensor ? tensor->tensor.element_size() : 0;
}
extern "C" const char* accel_tensor_device(const accel_tensor_t* tensor) {
  return tensor ? tensor->device.c_str() : "";
}

extern "C" int accel_tensor_data(const accel_tensor_t* tensor, void** out) {
  return guarded_out(__func__, out, [&] {
    require(tensor, "tensor");
    if (!tensor->tensor.is_cpu()) accel::fail(accel::Code::InvalidArgument, "the tensor is on " + tensor->device + ", not the CPU");
    if (!tensor->tensor.is_contiguous()) accel::fail(accel::Code::InvalidArgument, "the tensor is not contiguous");
    *out = tensor->tensor.data_ptr();
  });
}

extern "C" int accel_tensor_copy_to_buffer(const accel_tensor_t* tensor, void* dst, size_t capacity) {
  return guarded(__func__, [&] {
    require(tensor, "tensor");
    require(dst, "dst");
    const size_t bytes = static_cast<size_t>(tensor->tensor.numel()) * tensor->tensor.element_size();
    if (capacity < bytes) {
      accel::fail(accel::Code::InvalidArgument, "the buffer holds " + std::to_string(capacity) + " bytes but the tensor needs " +
                                                    std::to_string(bytes));
    }
    const auto contiguous = tensor->tensor.cpu().contiguous();
    std::memcpy(dst, contiguous.data_ptr(), bytes);
  });
}
