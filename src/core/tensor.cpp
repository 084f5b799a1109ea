#include "core/tensor.hpp"

#include <ATen/DLConvertor.h>
#include <ATen/dlpack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace accel {

namespace {

// DLPack code 6 is kDLBool in DLPack >= 0.8; LibTorch 1.13's copy predates it.
constexpr uint8_t kDLBoolCode = 6;

at::ScalarType scalar_type_of_dl(const DLDataType& type) {
  auto bad = [&]() -> at::ScalarType {
    fail(Code::Dtype, "DLPack dtype (code " + std::to_string(type.code) + ", bits " + std::to_string(type.bits) +
                          ", lanes " + std::to_string(type.lanes) + ") has no LibTorch equivalent");
  };
  if (type.lanes != 1) return bad();
  switch (type.code) {
    case kDLInt:
      switch (type.bits) {
        case 8: return at::kChar;
        case 16: return at::kShort;
        case 32: return at::kInt;
        case 64: return at::kLong;
      }
      break;
    case kDLUInt:
      if (type.bits == 8) return at::kByte;
      break;
    case kDLFloat:
      switch (type.bits) {
        case 16: return at::kHalf;
        case 32: return at::kFloat;
        case 64: return at::kDouble;
      }
      break;
    case kDLBfloat:
      if (type.bits == 16) return at::kBFloat16;
      break;
    case kDLBoolCode:
      if (type.bits == 8) return at::kBool;
      break;
  }
  return bad();
}

at::Device device_of_dl(const DLDevice& device) {
  switch (device.device_type) {
    case kDLCPU: return at::Device(at::kCPU);
    case kDLCUDA:
    case kDLCUDAManaged:
      if (!at::hasCUDA()) fail(Code::Unsupported, "DLPack tensor on CUDA, but this libaccel has no CUDA");
      return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.device_id));
    default:
      fail(Code::Unsupported, "DLPack device type " + std::to_string(device.device_type) + " is not supported");
  }
}

}  // namespace

at::Tensor tensor_from_dlpack(DLManagedTensor* managed) {
  const DLTensor& dl = managed->dl_tensor;
  if (dl.ndim < 0 || static_cast<size_t>(dl.ndim) > kMaxTensorDims) {
    fail(Code::InvalidArgument, "DLPack tensor has ndim " + std::to_string(dl.ndim) + " (expected 0 to 64)");
  }
  if (dl.ndim > 0 && dl.shape == nullptr) fail(Code::InvalidArgument, "DLPack tensor has ndim > 0 but no shape");
  std::vector<int64_t> sizes(dl.shape, dl.shape + dl.ndim);
  int64_t numel = 1;
  for (int32_t d = 0; d < dl.ndim; ++d) {
    if (sizes[d] < 0) {
      fail(Code::InvalidArgument, "DLPack tensor has negative size " + std::to_string(sizes[d]) + " in dim " +
                                      std::to_string(d));
    }
    numel *= sizes[d];
  }
  if (dl.data == nullptr && numel > 0) fail(Code::InvalidArgument, "DLPack tensor has elements but NULL data");
  const auto type = scalar_type_of_dl(dl.dtype);
  const auto device = device_of_dl(dl.device);
  std::vector<int64_t> strides;
  if (dl.strides != nullptr) {
    strides.assign(dl.strides, dl.strides + dl.ndim);
  } else {
    strides.assign(sizes.size(), 1);
    for (int32_t d = dl.ndim - 2; d >= 0; --d) strides[d] = strides[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  }
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return at::from_blob(
      data, sizes, strides,
      [managed](void*) {
        if (managed->deleter != nullptr) managed->deleter(managed);
      },
      at::TensorOptions(type).device(device));
}

DLManagedTensor* tensor_to_dlpack(const at::Tensor& tensor) {
  if (tensor.scalar_type() == at::kBool) {
    fail(Code::Dtype, "bool tensors cannot be exported to DLPack by LibTorch 1.13");
  }
  return at::toDLPack(tensor);
}

at::Tensor tensor_from_buffer(const void* data, int32_t code, const int64_t* shape, size_t ndim) {
  const auto type = scalar_type_of(code);
  if (ndim > kMaxTensorDims) fail(Code::InvalidArgument, "ndim " + std::to_string(ndim) + " is larger than 64");
  if (ndim > 0 && shape == nullptr) fail(Code::NullArgument, "shape is NULL but ndim is " + std::to_string(ndim));
  std::vector<int64_t> sizes(shape, shape + ndim);
  for (size_t d = 0; d < ndim; ++d) {
    if (sizes[d] < 0) fail(Code::InvalidArgument, "negative size " + std::to_string(sizes[d]) + " in dim " + std::to_string(d));
  }
  auto tensor = at::empty(sizes, at::TensorOptions(type));
  const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
  if (bytes > 0) {
    if (data == nullptr) fail(Code::NullArgument, "data is NULL but the shape has elements");
    std::memcpy(tensor.data_ptr(), data, bytes);
  }
  return tensor;
}

}  // namespace accel
