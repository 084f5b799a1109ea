// Gradient buckets on CUDA tensors, on every rank under `accel launch --nproc-per-node 2` with
// ACCEL_BACKEND=gloo (both ranks share one GPU, which NCCL refuses). Each rank trains on its half of a
// batch; after backward every gradient must be the average over the ranks, which is the gradient of one
// process on the whole batch. Through the C++ core, as tests/train/training_worker.cpp, because the C ABI
// does not hand out gradients. Exits 77 (ctest's skip) on a host without CUDA.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core_worker.hpp"
#include "train/training_loop.hpp"

namespace {

using namespace accel;
using namespace accel::train;

using core_worker::load_mlp;
using core_worker::rank;
using core_worker::state;
using core_worker::world;

at::Tensor output_of(Model& model, const at::Tensor& x) { return model.forward({x}, {}, true).values.front().second; }

// This rank's rows of a global batch split evenly over the ranks, in rank order.
at::Tensor my_rows(const at::Tensor& global) {
  const int64_t per_rank = global.size(0) / world();
  return global.narrow(0, rank() * per_rank, per_rank);
}

double max_difference(const at::Tensor& a, const at::Tensor& b) { return (a.cpu() - b.cpu()).abs().max().item<double>(); }

TEST(GpuBuckets, TheAveragedGradientsEqualOneProcessOnTheWholeBatch) {
  auto loop = std::make_shared<TrainingLoop>(state);
  ASSERT_EQ(state->device().rfind("cuda:", 0), 0u) << state->device();
  ASSERT_EQ(world(), 2);
  EXPECT_EQ(state->backend(), "gloo");
  const at::Device device(state->device());

  auto parallel = load_mlp("gpu_buckets");
  PrepareConfig config;
  // One bucket per parameter (b2's 16 bytes fill the first, every other parameter has at least 64), so
  // that all-reduces start while backward still runs on the GPU and the buckets are averaged separately.
  config.reducer.first_bucket_bytes = 4 * 4;
  config.reducer.bucket_bytes = 4 * 16;
  parallel->prepare(state, config);
  ASSERT_EQ(parallel->bucket_names().size(), parallel->named_parameters().size());
  for (const auto& parameter : parallel->named_parameters()) {
    EXPECT_EQ(parameter.second.device(), device) << parameter.first;
  }
  // Both unprepared, on the CPU in fp32: the whole batch on one process, and this rank's half alone (what
  // the gradients would be had no all-reduce happened).
  auto whole = load_mlp("gpu_buckets_whole");
  auto half = load_mlp("gpu_buckets_half");

  at::manual_seed(11);  // the same batches on every rank
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const auto x = at::randn({8 * world(), 8});
    const auto y = at::randn({8 * world(), 4});
    loop->accumulate();
    ASSERT_TRUE(state->sync_gradients());
    loop->backward(at::mse_loss(output_of(*parallel, my_rows(x).to(device)), my_rows(y).to(device)));
    at::mse_loss(output_of(*whole, x), y).backward();
    at::mse_loss(output_of(*half, my_rows(x)), my_rows(y)).backward();

    const auto& parameters = parallel->named_parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      const auto& [name, parameter] = parameters[i];
      const auto& grad = parameter.grad();
      ASSERT_TRUE(grad.defined()) << name;
      EXPECT_EQ(grad.device(), device) << name;
      EXPECT_LT(max_difference(grad, whole->named_parameters()[i].second.grad()), 1e-5) << name;
      EXPECT_GT(max_difference(grad, half->named_parameters()[i].second.grad()), 1e-4) << name << " was not averaged";
    }
    for (const auto* model : {parallel.get(), whole.get(), half.get()}) {
      for (const auto& parameter : model->named_parameters()) parameter.second.grad().zero_();
    }
  }
}

}  // namespace
