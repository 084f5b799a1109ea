#include "core/device.hpp"

#include <ATen/detail/CUDAHooksInterface.h>

#ifdef ACCEL_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "core/error.hpp"

namespace accel {

int cuda_device_count() { return at::detail::getCUDAHooks().getNumGPUs(); }

namespace {
int device_index(const std::string& device) {
  const auto colon = device.find(':');
  return colon == std::string::npos ? 0 : std::stoi(device.substr(colon + 1));
}
}  // namespace

std::string choose_device(const std::string& requested, bool use_cpu, int local_rank) {
  const int count = cuda_device_count();
  if (requested.empty()) {
    if (use_cpu || count == 0) return "cpu";
    return "cuda:" + std::to_string(local_rank % count);
  }
  if (requested == "cpu") return requested;
  if (use_cpu) fail(Code::InvalidArgument, "device '" + requested + "' contradicts use_cpu=true");
  if (count == 0) {
    fail(Code::Unsupported, "device '" + requested + "' asked for, but " +
                                (at::detail::getCUDAHooks().hasCUDA() ? "this host has no GPU"
                                                                      : "this libaccel was built without CUDA"));
  }
  const int index = device_index(requested);
  if (index >= count) {
    fail(Code::Unsupported, "device '" + requested + "' asked for, but only " + std::to_string(count) +
                                " CUDA device(s) are visible");
  }
  return "cuda:" + std::to_string(index);
}

void activate_device(const std::string& device) {
#ifdef ACCEL_WITH_CUDA
  if (device.rfind("cuda", 0) == 0) c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index(device)));
#else
  (void)device;
#endif
}

void release_cached_device_memory() {
#ifdef ACCEL_WITH_CUDA
  if (cuda_device_count() > 0) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

}  // namespace accel
