#include "distributed/seed.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <mutex>

namespace accel::distributed {

namespace {

void seed_generator(at::Generator generator, uint64_t seed) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(seed);
}

}  // namespace

void set_seed(const State& state, uint64_t seed, bool device_specific) {
  if (device_specific) seed += static_cast<uint64_t>(state.launch().rank);
  seed_generator(at::detail::getDefaultCPUGenerator(), seed);
  // As torch.cuda.manual_seed_all: a build with CUDA but no visible GPU has nothing to seed.
  const int64_t gpus = at::detail::getCUDAHooks().getNumGPUs();
  for (int64_t device = 0; device < gpus; ++device) {
    seed_generator(at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device))), seed);
  }
}

}  // namespace accel::distributed
