// ZeRO stage 3 on CUDA, on every rank under `accel launch --nproc-per-node 2` with ACCEL_BACKEND=gloo (both
// ranks share one GPU, which NCCL refuses): a TorchScript MLP the library cuts into units trains to stage 0's
// weights with its shares on the GPU, and with zero_cpu_offload (FSDP's CPUOffload) with its shares of
// parameters and gradients in pinned host memory, where the optimizer steps them; and a model of the caller's
// tensors in host memory is prepared onto the device a unit at a time; stages 1 and 2 with the optimizer
// offloaded (DeepSpeed's offload_optimizer) step pinned host copies of their pieces. Exits 77 (ctest's skip) on a host
// without CUDA.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/save_model.hpp"
#include "core/files.hpp"
#include "core_worker.hpp"
#include "distributed/collectives/collectives.hpp"
#include "temp_dir.hpp"
#include "train/ddp/sharded_units.hpp"
#include "train/optim/zero_optimizer.hpp"
#include "train/training_loop.hpp"

namespace {

using namespace accel;
using namespace accel::train;

using core_worker::load_mlp;
using core_worker::my_rows;
using core_worker::state;
using core_worker::test_optimizer;
using core_worker::world;

// The largest difference between two tensors, wherever they are.
double max_difference(const at::Tensor& a, const at::Tensor& b) { return (a.cpu() - b.cpu()).abs().max().item<double>(); }

// One synchronising step of each model with its optimizer, on this rank's rows of a batch drawn alike on every
// rank: AdamW with clipping.
void train_step(const std::shared_ptr<TrainingLoop>& loop, const std::vector<Model*>& models,
                const std::vector<std::shared_ptr<AcceleratedOptimizer>>& optimizers, const at::Device& device) {
  const auto x = my_rows(at::randn({4 * world(), 8})).to(device);
  const auto y = my_rows(at::randn({4 * world(), 4})).to(device);
  loop->accumulate();
  for (Model* model : models) {
    loop->backward(at::mse_loss(model->forward({x}, {}, true).values.front().second, y));
    loop->clip_grad_norm(*model, 0.05, 2.0);
  }
  for (const auto& optimizer : optimizers) {
    optimizer->step();
    optimizer->zero_grad();
  }
}

// A stage 3 model of the test MLP, a unit per layer, and its AdamW.
std::pair<std::shared_ptr<Model>, std::shared_ptr<AcceleratedOptimizer>> sharded_mlp(
    const std::shared_ptr<TrainingLoop>& loop, const std::string& tag, bool offload) {
  auto model = load_mlp(tag);
  model->set_units({0, 0, 1, 1});
  PrepareConfig stage3;
  stage3.reducer.zero_stage = 3;
  stage3.reducer.cpu_offload = offload;
  model->prepare(state, stage3);
  return {model, test_optimizer(loop, *model, "adamw")};
}

// Every trainable parameter of a stage 3 model, whole, copied to the host.
std::vector<at::Tensor> whole_values(Model& sharded) {
  std::vector<at::Tensor> values;
  sharded.for_each_gathered_parameter(true, [&](const at::Tensor&, const at::Tensor& value) { values.push_back(value.cpu()); });
  return values;
}

// AdamW with clipping, 8 steps, stage 0 and stage 3 side by side. On the device stage 3 takes stage 0's steps
// bit for bit; offloaded, the optimizer steps on the host, whose kernels may round otherwise than CUDA's
// (fused multiply-adds), so the weights agree to 1e-6. Offloaded, save_model writes the trained weights whole
// and load_model puts each share back in host memory; and a run resumed from save_state (the optimizer's
// state loaded into host memory with the shares) takes the same next steps as the run that saved. On one
// process offloaded only (without the option it shards nothing): each unit whole in host memory, a gather a
// copy to the device.
TEST(GpuSharded, StageThreeTakesStageZerosStepsWithItsSharesOnTheDeviceOrOffloaded) {
  ASSERT_EQ(state->device().rfind("cuda:", 0), 0u) << state->device();
  ASSERT_LE(world(), 2);
  const at::Device device(state->device());
  auto loop = std::make_shared<TrainingLoop>(state);
  for (const bool offload : {false, true}) {
    if (!offload && world() == 1) continue;
    SCOPED_TRACE(offload ? "zero_cpu_offload" : "shares on the device");
    const std::string tag = offload ? "offloaded" : "on_device";
    auto whole = load_mlp("gpu_whole_" + tag);
    const at::Tensor untouched = load_mlp("gpu_untouched_" + tag)->named_parameters()[0].second;
    whole->prepare(state, PrepareConfig{});
    auto whole_optimizer = test_optimizer(loop, *whole, "adamw");
    auto [sharded, sharded_optimizer] = sharded_mlp(loop, "gpu_sharded_" + tag, offload);
    const ShardedUnits& units = *sharded->sharded_units();
    ASSERT_GT(units.unit_count(), 1u);
    for (size_t u = 0; u < units.unit_count(); ++u) {
      EXPECT_EQ(units.device(u), device) << "unit " << u;
      const at::Tensor& chunk = units.partition().parameter_chunks[u];
      EXPECT_EQ(chunk.device(), offload ? at::Device(at::kCPU) : device) << "unit " << u;
      EXPECT_EQ(chunk.is_pinned(), offload) << "unit " << u;
    }
    at::manual_seed(7);  // the same batches on every rank
    for (int step = 0; step < 8; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      train_step(loop, {whole.get(), sharded.get()}, {whole_optimizer, sharded_optimizer}, device);
      for (const auto& [name, parameter] : sharded->named_parameters()) {
        EXPECT_EQ(parameter.storage().nbytes(), 0u) << name << " held on the device between steps";
        // Prepare left them in host memory, taking each unit to the device; the forward's views are there.
        EXPECT_EQ(parameter.device(), device) << name;
      }
    }
    const auto values = whole_values(*sharded);
    const auto expected = whole->trainable_parameters();
    ASSERT_EQ(values.size(), expected.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (offload) {
        EXPECT_LE(max_difference(values[i], expected[i].second), 1e-6) << expected[i].first;
      } else {
        EXPECT_TRUE(values[i].equal(expected[i].second.cpu())) << expected[i].first;
      }
    }
    EXPECT_GT(max_difference(expected[0].second, untouched), 1e-4) << "nothing trained";
    if (!offload) continue;
    std::string directory = test_support::temp_directory() + "/gpu_sharded_" + std::to_string(getpid());
    distributed::broadcast_bytes(*state, directory, 0);
    ckpt::save_model(*state, *sharded, directory, 0);
    auto reloaded = load_mlp("gpu_reloaded");
    ckpt::load_model(*reloaded, directory);
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_TRUE(reloaded->trainable_parameters()[i].second.equal(values[i])) << expected[i].first;
    }
    ckpt::load_model(*sharded, directory);
    const auto loaded = whole_values(*sharded);
    for (size_t i = 0; i < values.size(); ++i) EXPECT_TRUE(loaded[i].equal(values[i])) << expected[i].first;
    ckpt::CheckpointObjects saving, loading;
    saving.models = {sharded.get()};
    saving.optimizers = {sharded_optimizer.get()};
    ckpt::save_state(state, directory + "/checkpoint", saving);
    auto [resumed, resumed_optimizer] = sharded_mlp(loop, "gpu_resumed", true);
    loading.models = {resumed.get()};
    loading.optimizers = {resumed_optimizer.get()};
    ckpt::load_state(state, directory + "/checkpoint", loading);
    // Its state was loaded beside the pieces it steps, in host memory (on the device, the step would fail).
    Optimizer& stepped = resumed_optimizer->optimizer();
    for (size_t i = 0; i < stepped.owned_elements().size(); ++i) {
      EXPECT_TRUE(stepped.owned_tensor(i).device().is_cpu()) << "piece " << i << " on " << stepped.owned_tensor(i).device();
    }
    for (int step = 0; step < 2; ++step) {
      train_step(loop, {sharded.get(), resumed.get()}, {sharded_optimizer, resumed_optimizer}, device);
    }
    const auto continued = whole_values(*sharded), after_resume = whole_values(*resumed);
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_TRUE(after_resume[i].equal(continued[i])) << expected[i].first << " after the resume";
    }
    distributed::all_or_none(*state, [&] { if (core_worker::rank() == 0) remove_all(directory); }, "removing the saved model");
  }
}

// A model of the caller's tensors left in host memory (larger than the device, say): prepare takes process 0's
// values a unit at a time to the device, never reading the other process's tensors (one element expanded to
// each shape), and the units gathered on the device hold process 0's values. On one process, offloaded: the
// units stay in host memory, and only a gathered unit is on the device.
TEST(GpuSharded, ACallersModelInHostMemoryIsTakenToTheDeviceAUnitAtATime) {
  const at::Device device(state->device());
  const auto reference = load_mlp("gpu_host_reference");
  NamedTensors host;
  for (const auto& [name, tensor] : reference->named_parameters()) {
    const at::Tensor values = core_worker::rank() == 0 ? tensor.detach().clone() : at::empty({}).expand(tensor.sizes());
    host.emplace_back(name, values.requires_grad_());
  }
  auto model = Model::from_tensors(host, std::vector<bool>(host.size(), true), {});
  model->set_units({0, 0, 1, 1});
  PrepareConfig stage3;
  stage3.reducer.zero_stage = 3;
  stage3.reducer.cpu_offload = world() == 1;
  model->prepare(state, stage3);
  const ShardedUnits& units = *model->sharded_units();
  for (size_t u = 0; u < units.unit_count(); ++u) {
    EXPECT_EQ(units.device(u), device) << "unit " << u;
    EXPECT_EQ(units.partition().parameter_chunks[u].device(), world() == 1 ? at::Device(at::kCPU) : device) << "unit " << u;
  }
  for (size_t i = 0; i < host.size(); ++i) {
    const auto [unit, offset] = model->parameter_place(i);
    const at::Tensor full = at::empty({units.unit_numel(unit)}, at::TensorOptions().device(device));
    model->gather_unit(unit, full);
    const at::Tensor expected = reference->named_parameters()[i].second;
    EXPECT_TRUE(full.narrow(0, offset, expected.numel()).view(expected.sizes()).cpu().equal(expected)) << host[i].first;
  }
}

// ZeRO-Offload under stages 1 and 2: the parameters stay whole on the device, the optimizer's pieces and their
// gradients are pinned host copies, its state is in host memory, and the weights are stage 0's to 1e-6 (the
// step runs on the CPU, whose kernels may round otherwise than CUDA's).
TEST(GpuSharded, StagesOneAndTwoOffloadedStepHostCopiesOfTheirPieces) {
  const at::Device device(state->device());
  auto loop = std::make_shared<TrainingLoop>(state);
  std::vector<std::shared_ptr<Model>> models;
  std::vector<std::shared_ptr<AcceleratedOptimizer>> optimizers;
  for (int32_t stage = 0; stage <= 2; ++stage) {
    models.push_back(load_mlp("gpu_offloaded_stage" + std::to_string(stage)));
    PrepareConfig config;
    config.reducer.zero_stage = stage;
    config.reducer.cpu_offload = stage > 0;
    models.back()->prepare(state, config);
    optimizers.push_back(test_optimizer(loop, *models.back(), "adamw"));
  }
  at::manual_seed(7);
  for (int step = 0; step < 8; ++step) {
    train_step(loop, {models[0].get(), models[1].get(), models[2].get()}, optimizers, device);
  }
  for (int32_t stage = 1; stage <= 2; ++stage) {
    SCOPED_TRACE("zero_stage " + std::to_string(stage));
    const ZeroShard& shard = *optimizers[stage]->optimizer().zero_shard();
    ASSERT_FALSE(shard.views().empty());
    for (const at::Tensor& piece : shard.views()) {
      EXPECT_TRUE(piece.device().is_cpu());
      EXPECT_TRUE(piece.is_pinned());
    }
    const auto expected = models[0]->trainable_parameters();
    const auto actual = models[stage]->trainable_parameters();
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(actual[i].second.device(), device) << actual[i].first;
      EXPECT_LE(max_difference(actual[i].second, expected[i].second), 1e-6) << actual[i].first;
    }
  }
}

}  // namespace
