// Shared by the multi-process workers that test the C++ core directly (gradients and other internals the
// C ABI does not hand out): every rank runs the same tests against one state made by core_worker_main.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "distributed/state.hpp"
#include "train/model/model.hpp"
#include "train/training_loop.hpp"

namespace core_worker {

extern std::shared_ptr<accel::distributed::State> state;

inline int64_t rank() { return state->launch().rank; }
inline int64_t world() { return state->launch().world_size; }

// tiny_models' MLP, written to a file named after tag and loaded.
std::shared_ptr<accel::train::Model> load_mlp(const std::string& tag);

// Rows of this rank when a global batch is split evenly over the ranks, in rank order.
inline at::Tensor my_rows(const at::Tensor& global) {
  const int64_t per_rank = global.size(0) / world();
  return global.narrow(0, rank() * per_rank, per_rank);
}

// The tests' optimizer of `kind` over a prepared model: sgd (lr 0.05, momentum 0.9) or adamw (lr 0.01), weight
// decay 0.01.
std::shared_ptr<accel::train::AcceleratedOptimizer> test_optimizer(const std::shared_ptr<accel::train::TrainingLoop>& loop,
                                                                   const accel::train::Model& model,
                                                                   const std::string& kind);

}  // namespace core_worker
