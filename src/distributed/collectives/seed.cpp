#include "distributed/collectives/seed.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <mutex>
#include <vector>

#include "distributed/collectives/collectives.hpp"

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

void synchronize_generator(State& state, at::Generator& generator) {
  auto generator_state = generator.get_state();
  broadcast(state, generator_state, 0);
  generator.set_state(generator_state);
}

void synchronize_rng_states(State& state, bool torch_generator, bool cuda_generator) {
  std::vector<at::Generator> generators;
  if (torch_generator) generators.push_back(at::detail::getDefaultCPUGenerator());
  const at::Device device(state.device());
  if (cuda_generator && device.is_cuda()) {
    generators.push_back(at::globalContext().defaultGenerator(at::Device(at::kCUDA, device.has_index() ? device.index() : 0)));
  }
  for (auto& generator : generators) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    synchronize_generator(state, generator);
  }
}

}  // namespace accel::distributed
