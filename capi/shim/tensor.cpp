#include "accel/tensor.h"

#include "core/tensor.hpp"
#include "shim/entry_point.hpp"

static_assert(ACCEL_TENSOR_MAX_DIMS == accel::kMaxTensorDims);

extern "C" int accel_tensor_from_dlpack(accel_tensor_t** out, struct DLManagedTensor* managed) {
  return guarded_out(__func__, out, [&] {
    require(managed, "managed");
    *out = new accel_tensor(accel::tensor_from_dlpack(managed));
  });
}

extern "C" int accel_tensor_to_dlpack(struct DLManagedTensor** out, const accel_tensor_t* tensor) {
  return guarded_out(__func__, out, [&] {
    require(tensor, "tensor");
    *out = accel::tensor_to_dlpack(tensor->tensor);
  });
}

extern "C" int accel_tensor_from_buffer(accel_tensor_t** out, const void* data, int32_t dtype, const int64_t* shape,
                                        size_t ndim) {
  return guarded_out(__func__, out, [&] { *out = new accel_tensor(accel::tensor_from_buffer(data, dtype, shape, ndim)); });
}

extern "C" void accel_tensor_free(accel_tensor_t* tensor) { release(__func__, tensor); }

extern "C" size_t accel_tensor_ndim(const accel_tensor_t* tensor) {
  return read_handle<size_t>(__func__, tensor, 0, [](const accel_tensor& t) { return t.shape.size(); });
}
extern "C" const int64_t* accel_tensor_shape(const accel_tensor_t* tensor) {
  return read_handle<const int64_t*>(__func__, tensor, nullptr, [](const accel_tensor& t) { return t.shape.data(); });
}
extern "C" int64_t accel_tensor_numel(const accel_tensor_t* tensor) {
  return read_handle<int64_t>(__func__, tensor, 0, [](const accel_tensor& t) { return t.tensor.numel(); });
}
extern "C" int32_t accel_tensor_dtype(const accel_tensor_t* tensor) {
  return read_handle<int32_t>(__func__, tensor, 0,
                              [](const accel_tensor& t) { return accel::dtype_code(t.tensor.scalar_type()); });
}
extern "C" size_t accel_tensor_element_size(const accel_tensor_t* tensor) {
  return read_handle<size_t>(__func__, tensor, 0, [](const accel_tensor& t) { return t.tensor.element_size(); });
}
extern "C" const char* accel_tensor_device(const accel_tensor_t* tensor) {
  return read_handle<const char*>(__func__, tensor, "", [](const accel_tensor& t) { return t.device.c_str(); });
}

extern "C" int accel_tensor_data(const accel_tensor_t* tensor, void** out) {
  return guarded_out(__func__, out, [&] {
    require(tensor, "tensor");
    *out = accel::cpu_data_pointer(tensor->tensor);
  });
}

extern "C" int accel_tensor_copy_to_buffer(const accel_tensor_t* tensor, void* dst, size_t capacity) {
  return guarded(__func__, [&] {
    require(tensor, "tensor");
    if (tensor->tensor.numel() > 0) require(dst, "dst");
    accel::copy_to_buffer(tensor->tensor, dst, capacity);
  });
}
