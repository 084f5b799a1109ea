#include "ckpt/rng_states.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <algorithm>
#include <mutex>

#include "core/error.hpp"

#ifdef ACCEL_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

namespace accel::ckpt {

namespace {

// Every generator of this process, by the name its state is saved under.
std::vector<std::pair<std::string, at::Generator>> generators() {
  std::vector<std::pair<std::string, at::Generator>> all{{"cpu", at::detail::getDefaultCPUGenerator()}};
#ifdef ACCEL_WITH_CUDA
  for (int64_t i = 0; i < static_cast<int64_t>(at::cuda::getNumGPUs()); ++i) {
    all.emplace_back("cuda:" + std::to_string(i), at::cuda::detail::getDefaultCUDAGenerator(i));
  }
#endif
  return all;
}

const at::Tensor* find_state(const NamedTensors& states, const std::string& name) {
  auto found = std::find_if(states.begin(), states.end(), [&](const auto& entry) { return entry.first == name; });
  return found == states.end() ? nullptr : &found->second;
}

}  // namespace

NamedTensors capture_rng_states() {
  NamedTensors states;
  for (auto& [name, generator] : generators()) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    states.emplace_back(name, generator.get_state());
  }
  return states;
}

void check_rng_states(const NamedTensors& states, const std::string& path) {
  for (auto& [name, generator] : generators()) {
    const at::Tensor* state = find_state(states, name);
    if (state == nullptr) fail(Code::InvalidArgument, path + ": no random state for generator '" + name + "'");
    if (state->scalar_type() != at::kByte || state->dim() != 1) {
      fail(Code::InvalidArgument, path + ": random state '" + name + "' is not a 1-d uint8 tensor");
    }
    std::lock_guard<std::mutex> lock(generator.mutex());
    if (state->numel() != generator.get_state().numel()) {
      fail(Code::InvalidArgument, path + ": random state '" + name + "' has " + std::to_string(state->numel()) +
                                      " bytes, this generator's has " + std::to_string(generator.get_state().numel()));
    }
  }
}

void restore_rng_states(const NamedTensors& states) {
  for (auto& [name, generator] : generators()) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(find_state(states, name)->clone());
  }
}

}  // namespace accel::ckpt
