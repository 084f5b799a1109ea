#include "core/tensor.hpp"

#include <ATen/DLConvertor.h>
#include <ATen/dlpack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/lent_memory.hpp"
#include "core/value_ranges.hpp"

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
  // Read as the integer it is: C callers may put any value in the enum (a newer DLPack's device, garbage),
  // and loading a value outside DLDeviceType's range as the enum is undefined behaviour in C++.
  std::underlying_type_t<DLDeviceType> type = 0;
  static_assert(sizeof type == sizeof device.device_type);
  std::memcpy(&type, &device.device_type, sizeof type);
  switch (type) {
    case kDLCPU: return at::Device(at::kCPU);
    case kDLCUDA:
    case kDLCUDAManaged:
      if (!at::hasCUDA()) fail(Code::Unsupported, "DLPack tensor on CUDA, but this libaccel has no CUDA");
      return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.device_id));
    default:
      fail(Code::Unsupported, "DLPack device type " + std::to_string(type) + " is not supported");
  }
}

}  // namespace

at::Tensor tensor_from_dlpack(DLManagedTensor* managed) {
  const DLTensor& dl = managed->dl_tensor;
  const std::string what = "DLPack tensor";
  if (dl.ndim < 0 || static_cast<size_t>(dl.ndim) > kMaxTensorDims) {
    fail(Code::InvalidArgument, what + " has ndim " + std::to_string(dl.ndim) + " (expected 0 to 64)");
  }
  if (dl.ndim > 0 && dl.shape == nullptr) fail(Code::InvalidArgument, what + " has ndim > 0 but no shape");
  const std::vector<int64_t> sizes(dl.shape, dl.shape + dl.ndim);
  const int64_t numel = checked_numel(sizes, what);
  const auto type = scalar_type_of_dl(dl.dtype);
  const std::vector<int64_t> strides =
      dl.strides != nullptr ? std::vector<int64_t>(dl.strides, dl.strides + dl.ndim) : contiguous_strides(sizes);
  const int64_t bytes = checked_storage_bytes(sizes, strides, 0, c10::elementSize(type), what);
  if (dl.byte_offset > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - bytes)) {
    fail(Code::InvalidArgument, what + ": byte_offset " + std::to_string(dl.byte_offset) + " plus the " +
                                    std::to_string(bytes) + " bytes it reaches overflow int64");
  }
  if (dl.data == nullptr && numel > 0) fail(Code::InvalidArgument, what + " has elements but NULL data");
  const auto device = device_of_dl(dl.device);
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return at::from_blob(
      data, sizes, strides,
      [managed](void*) { give_back(managed); },
      at::TensorOptions(type).device(device));
}

DLManagedTensor* tensor_to_dlpack(const at::Tensor& tensor) {
  if (tensor.scalar_type() == at::kBool) {
    fail(Code::Dtype, "bool tensors cannot be exported to DLPack by LibTorch 1.13");
  }
  // The consumer may write to the memory without LibTorch's version counter seeing it.
  forget_value_ranges(tensor);
  DLManagedTensor* managed = at::toDLPack(tensor);
  // The consumer's thread, letting go of the export, is a caller's thread: memory the export shares with
  // a tensor lent to the library goes back to its producer at once (core/lent_memory.hpp).
  static const auto aten_deleter = managed->deleter;
  managed->deleter = [](DLManagedTensor* self) {
    const CallerThread consumer;
    aten_deleter(self);
  };
  return managed;
}

at::Tensor tensor_from_buffer(const void* data, int32_t code, const int64_t* shape, size_t ndim) {
  const auto type = scalar_type_of(code);
  if (ndim > kMaxTensorDims) fail(Code::InvalidArgument, "ndim " + std::to_string(ndim) + " is larger than 64");
  if (ndim > 0 && shape == nullptr) fail(Code::NullArgument, "shape is NULL but ndim is " + std::to_string(ndim));
  const std::vector<int64_t> sizes(shape, shape + ndim);
  const std::string what = "buffer tensor";
  checked_numel(sizes, what);  // first: contiguous_strides multiplies the sizes
  const auto bytes =
      static_cast<size_t>(checked_storage_bytes(sizes, contiguous_strides(sizes), 0, c10::elementSize(type), what));
  if (bytes > 0 && data == nullptr) fail(Code::NullArgument, "data is NULL but the shape has elements");
  at::Tensor tensor;
  try {
    tensor = at::empty(sizes, at::TensorOptions(type));
  } catch (const std::exception& error) {
    fail_from(error, Code::Torch,
              "cannot allocate the " + std::to_string(bytes) + " bytes of a tensor of shape " + shape_string(sizes) + ": ");
  }
  if (bytes > 0) std::memcpy(tensor.data_ptr(), data, bytes);
  return tensor;
}

void* cpu_data_pointer(const at::Tensor& tensor) {
  if (!tensor.is_cpu()) fail(Code::InvalidArgument, "the tensor is on " + tensor.device().str() + ", not the CPU");
  if (!tensor.is_contiguous()) fail(Code::InvalidArgument, "the tensor is not contiguous");
  return tensor.data_ptr();
}

void copy_to_buffer(const at::Tensor& tensor, void* dst, size_t capacity) {
  const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
  if (capacity < bytes) {
    fail(Code::InvalidArgument, "the buffer holds " + std::to_string(capacity) + " bytes but the tensor needs " +
                                    std::to_string(bytes));
  }
  if (bytes == 0) return;
  const auto contiguous = tensor.cpu().contiguous();
  std::memcpy(dst, contiguous.data_ptr(), bytes);
}

}  // namespace accel
