#include <gtest/gtest.h>

#include <cstdio>

#include "core/env.hpp"
#include "core_worker.hpp"
#include "tiny_models.hpp"

#ifdef WORKER_NEEDS_CUDA
#include "../gpu/cuda_present.hpp"
#endif

namespace core_worker {

std::shared_ptr<accel::distributed::State> state;

std::shared_ptr<accel::train::Model> load_mlp(const std::string& tag) {
  return accel::train::Model::load_file(tiny_models::mlp(tiny_models::temp_file(tag + ".pt")));
}

std::shared_ptr<accel::train::AcceleratedOptimizer> test_optimizer(const std::shared_ptr<accel::train::TrainingLoop>& loop,
                                                                   const accel::train::Model& model,
                                                                   const std::string& kind) {
  accel::train::OptimizerConfig config;
  config.lr = kind == "sgd" ? 0.05 : 0.01;
  config.momentum = kind == "sgd" ? 0.9 : 0.0;
  config.weight_decay = 0.01;
  return accel::train::prepare_optimizer(loop, model, kind, config);
}

}  // namespace core_worker

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
#ifdef WORKER_NEEDS_CUDA
  if (gpu::worker_skipped_without_cuda()) return gpu::kSkipExitCode;
#endif
  try {
    core_worker::state = accel::distributed::State::acquire(nullptr, accel::process_env());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "state: %s\n", error.what());
    return 1;
  }
  const int result = RUN_ALL_TESTS();
  core_worker::state->shutdown();
  return result;
}
