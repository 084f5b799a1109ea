// The training step on every rank under `accel launch`, through the C++ core. Which suites run depends
// on the launch (see tests/CMakeLists.txt): Ddp.* with 2 processes, Accumulation.* with 2 processes and
// ACCEL_GRADIENT_ACCUMULATION_STEPS=2 (SyncEachBatch.* also with ACCEL_SYNC_EACH_BATCH=1), Fp16.* and Bf16.*
// with 1 process and that ACCEL_MIXED_PRECISION, SchedulerRule.* with 1 and 2 processes, and with 2
// processes and ACCEL_GRADIENT_ACCUMULATION_STEPS=2 (SchedulerPerCall.* also with
// ACCEL_STEP_SCHEDULER_WITH_OPTIMIZER=0).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/save_model.hpp"
#include "core/error.hpp"
#include "core_worker.hpp"
#include "data/loader.hpp"
#include "distributed/collectives/collectives.hpp"
#include "distributed/group/process_group.hpp"
#include "expect_error.hpp"
#include "tiny_models.hpp"
#include "train/precision/autocast.hpp"
#include "train/training_loop.hpp"

namespace {

using namespace accel;
using namespace accel::train;

using core_worker::load_mlp;
using core_worker::my_rows;
using core_worker::rank;
using core_worker::state;
using core_worker::world;

NamedTensors trainable(const Model& model) {
  NamedTensors out;
  for (auto& parameter : model.named_parameters()) {
    if (parameter.second.requires_grad()) out.push_back(parameter);
  }
  return out;
}

at::Tensor output_of(Model& model, const at::Tensor& x) { return model.forward({x}, {}, true).values.front().second; }

double max_difference(const Model& a, const Model& b) {
  double worst = 0;
  const auto left = a.named_parameters();
  const auto right = b.named_parameters();
  for (size_t i = 0; i < left.size(); ++i) {
    worst = std::max(worst, (left[i].second - right[i].second).abs().max().item<double>());
  }
  return worst;
}

// A prepared model with an accelerated optimizer, and an unprepared copy (same weights) with a plain one:
// the reference a test trains by hand. Several of them make a GAN's generator and discriminator.
struct Trained {
  std::shared_ptr<Model> model;
  std::shared_ptr<Model> reference;
  std::unique_ptr<AcceleratedOptimizer> optimizer;
  std::unique_ptr<Optimizer> reference_optimizer;
};

Trained trained(const std::shared_ptr<TrainingLoop>& loop, const std::string& tag, const std::string& kind,
                const OptimizerConfig& config, const PrepareConfig& prepare = {}) {
  Trained made;
  made.model = load_mlp(tag);
  made.model->prepare(state, prepare);
  made.reference = load_mlp(tag + "_reference");
  made.optimizer = std::make_unique<AcceleratedOptimizer>(loop,
                                                          std::make_unique<Optimizer>(kind, trainable(*made.model), config));
  made.reference_optimizer = std::make_unique<Optimizer>(kind, trainable(*made.reference), config);
  return made;
}

// A prepared model, an accelerated sgd with lr 1 and a linear schedule from it down to 0 over 20 steps.
struct Scheduled {
  std::shared_ptr<Model> model;
  std::shared_ptr<AcceleratedOptimizer> optimizer;
  std::unique_ptr<AcceleratedScheduler> scheduler;
};

Scheduled linear_schedule(const std::shared_ptr<TrainingLoop>& loop, const std::string& tag) {
  Scheduled made;
  made.model = load_mlp(tag);
  made.model->prepare(state, PrepareConfig{});
  OptimizerConfig config;
  config.lr = 1.0;
  made.optimizer = std::make_shared<AcceleratedOptimizer>(loop,
                                                          std::make_unique<Optimizer>("sgd", trainable(*made.model), config));
  SchedulerConfig schedule;
  schedule.total_steps = 20;
  made.scheduler = std::make_unique<AcceleratedScheduler>(
      made.optimizer, std::make_unique<Scheduler>(made.optimizer->optimizer(), "linear", schedule), /*split_batches=*/false);
  return made;
}

// Data-parallel training on 2 processes with a batch of b per rank must equal one process with 2b.
void expect_gold_equivalence(const std::string& kind, const OptimizerConfig& config) {
  auto parallel = load_mlp("gold_" + kind);
  parallel->prepare(state, PrepareConfig{});
  auto reference = load_mlp("gold_reference_" + kind);
  auto loop = std::make_shared<TrainingLoop>(state);
  AcceleratedOptimizer optimizer(loop, std::make_unique<Optimizer>(kind, trainable(*parallel), config));
  Optimizer reference_optimizer(kind, trainable(*reference), config);
  at::manual_seed(123);
  const auto inputs = at::randn({20, 4 * world(), 8});
  const auto targets = at::randn({20, 4 * world(), 4});
  for (int64_t step = 0; step < 20; ++step) {
    loop->accumulate();
    loop->backward(at::mse_loss(output_of(*parallel, my_rows(inputs[step])), my_rows(targets[step])));
    optimizer.step();
    optimizer.zero_grad();
    at::mse_loss(output_of(*reference, inputs[step]), targets[step]).backward();
    reference_optimizer.step();
    reference_optimizer.zero_grad();
  }
  EXPECT_LT(max_difference(*parallel, *reference), 1e-6) << kind;
}

TEST(Ddp, TwoProcessesEqualOneProcessWithTheGlobalBatchForSgdWithMomentum) {
  OptimizerConfig config;
  config.lr = 0.05;
  config.momentum = 0.9;
  expect_gold_equivalence("sgd", config);
}

TEST(Ddp, TwoProcessesEqualOneProcessWithTheGlobalBatchForAdamW) {
  OptimizerConfig config;
  config.lr = 0.01;
  config.weight_decay = 0.01;
  expect_gold_equivalence("adamw", config);
}

TEST(Ddp, BucketsFollowReverseRegistrationOrder) {
  auto model = load_mlp("buckets");
  PrepareConfig config;
  config.reducer.first_bucket_bytes = 4 * 16;  // b2 alone... then by 25 MB
  config.reducer.bucket_bytes = 4 * 64;
  model->prepare(state, config);
  const auto buckets = model->bucket_names();
  ASSERT_GE(buckets.size(), 2u);
  EXPECT_EQ(buckets.front().front(), "b2");
  EXPECT_EQ(buckets.back().back(), "w1");
}

// This process's mappings of accel shared-memory segments, as [start, end) address ranges.
std::vector<std::pair<uintptr_t, uintptr_t>> accel_shared_memory_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::pair<uintptr_t, uintptr_t>> mappings;
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t start = 0, end = 0;
    if (line.find("/dev/shm/accel-") == std::string::npos) continue;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &start, &end) == 2) mappings.emplace_back(start, end);
  }
  return mappings;
}

bool in_accel_shared_memory(const void* address) {
  const auto value = reinterpret_cast<uintptr_t>(address);
  for (const auto& [start, end] : accel_shared_memory_mappings()) {
    if (value >= start && value < end) return true;
  }
  return false;
}

// With the shared-memory transport the buckets are reduced where they are: with gradient_as_bucket_view
// the averaged gradients are views into them, so they must lie in the segment (with Gloo, in no segment).
TEST(Ddp, BucketsLiveInSharedMemoryExactlyWhenAllReducesGoThroughIt) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto model = load_mlp("resident");
  PrepareConfig config;
  config.reducer.gradient_as_bucket_view = true;
  model->prepare(state, config);
  loop->accumulate();
  at::manual_seed(3);
  loop->backward(output_of(*model, at::randn({4, 8})).sum());
  const bool through_shared_memory = state->backend_name() == "gloo+shm";
  for (const auto& parameter : trainable(*model)) {
    EXPECT_EQ(in_accel_shared_memory(parameter.second.grad().data_ptr()), through_shared_memory)
        << parameter.first << " under " << state->backend_name();
  }
}

// A model's bucket segments go with the model: preparing models one after another does not pile them up.
TEST(Ddp, BucketSegmentsGoWithTheirModel) {
  const size_t before = accel_shared_memory_mappings().size();
  for (int i = 0; i < 3; ++i) {
    auto model = load_mlp("short_lived");
    model->prepare(state, PrepareConfig{});
    if (state->backend_name() == "gloo+shm") EXPECT_GT(accel_shared_memory_mappings().size(), before);
  }
  EXPECT_EQ(accel_shared_memory_mappings().size(), before);
}

TEST(Ddp, ClipGradNormEqualsTheNormComputedByHand) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto parallel = load_mlp("clip");
  parallel->prepare(state, PrepareConfig{});
  auto reference = load_mlp("clip_reference");
  at::manual_seed(7);
  const auto x = at::randn({4 * world(), 8});
  const auto y = at::randn({4 * world(), 4});
  loop->accumulate();
  loop->backward(at::mse_loss(output_of(*parallel, my_rows(x)), my_rows(y)));
  at::mse_loss(output_of(*reference, x), y).backward();
  double by_hand = 0;
  for (const auto& parameter : reference->named_parameters()) by_hand += parameter.second.grad().pow(2).sum().item<double>();
  by_hand = std::sqrt(by_hand);
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : trainable(*parallel)) parameters.push_back(parameter.second);
  const double norm = loop->clip_grad_norm(parameters, by_hand / 2, 2.0);
  EXPECT_NEAR(norm, by_hand, 1e-5);
  double clipped = 0;
  for (const auto& parameter : parameters) clipped += parameter.grad().pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(clipped), by_hand / 2, 1e-4);
}

TEST(Ddp, AParameterWithoutGradientIsNamedUnlessFindUnusedParameters) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto model = Model::load_file(tiny_models::mlp_with_unused_parameter(tiny_models::temp_file("unused.pt")));
  model->prepare(state, PrepareConfig{});
  loop->accumulate();
  try {
    loop->backward(output_of(*model, at::randn({2, 8})).sum());
    FAIL() << "no error";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("unused"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("find_unused_parameters"), std::string::npos) << error.what();
  }
  auto tolerant = Model::load_file(tiny_models::mlp_with_unused_parameter(tiny_models::temp_file("unused2.pt")));
  PrepareConfig config;
  config.reducer.find_unused_parameters = true;
  tolerant->prepare(state, config);
  loop->accumulate();
  loop->backward(output_of(*tolerant, at::randn({2, 8})).sum());
  for (const auto& parameter : tolerant->named_parameters()) {
    if (parameter.first != "unused") EXPECT_TRUE(parameter.second.grad().defined()) << parameter.first;
  }
}

// Tied weights (tiny_models::tied: head.w is the very tensor w1, as an embedding and its output layer):
// one parameter everywhere. Listed once under its first name, as torch's named_parameters; one slot of one
// bucket, reduced once; one optimizer entry; counted once by clip_grad_norm; and two processes train it
// as one process does on the global batch, the tie holding throughout.
TEST(Ddp, TiedWeightsAreOneParameterEverywhere) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto parallel = Model::load_file(tiny_models::tied(tiny_models::temp_file("tied_parallel.pt")));
  auto reference = Model::load_file(tiny_models::tied(tiny_models::temp_file("tied_reference.pt")));
  std::vector<std::string> names;
  for (const auto& parameter : parallel->named_parameters()) names.push_back(parameter.first);
  EXPECT_EQ(names, (std::vector<std::string>{"w1", "b1"}));
  parallel->prepare(state, PrepareConfig{});
  std::vector<std::string> bucketed;
  for (const auto& bucket : parallel->bucket_names()) bucketed.insert(bucketed.end(), bucket.begin(), bucket.end());
  EXPECT_EQ(bucketed, (std::vector<std::string>{"b1", "w1"}));
  OptimizerConfig config;
  config.lr = 0.05;
  config.momentum = 0.9;
  AcceleratedOptimizer optimizer(loop, std::make_unique<Optimizer>("sgd", parallel->trainable_parameters(), config));
  Optimizer reference_optimizer("sgd", reference->trainable_parameters(), config);
  at::manual_seed(29);
  const auto inputs = at::randn({5, 4 * world(), 8});
  const auto targets = at::randn({5, 4 * world(), 8});
  for (int64_t step = 0; step < 5; ++step) {
    loop->accumulate();
    loop->backward(at::mse_loss(output_of(*parallel, my_rows(inputs[step])), my_rows(targets[step])));
    at::mse_loss(output_of(*reference, inputs[step]), targets[step]).backward();
    if (step == 0) {
      double by_hand = 0;
      for (const auto& parameter : reference->named_parameters()) by_hand += parameter.second.grad().pow(2).sum().item<double>();
      EXPECT_NEAR(loop->clip_grad_norm(*parallel, 1e9, 2.0), std::sqrt(by_hand), 1e-5);
    }
    optimizer.step();
    optimizer.zero_grad();
    reference_optimizer.step();
    reference_optimizer.zero_grad();
  }
  EXPECT_LT(max_difference(*parallel, *reference), 1e-6);
  const NamedTensors every = parallel->parameters_and_buffers();
  EXPECT_TRUE(field_named(every, "head.w", "the model").is_same(field_named(every, "w1", "the model")));
  // Saved and loaded back, the tie holds: one tensor, under both names, with the trained values.
  std::string directory = tiny_models::temp_file("tied_saved");
  distributed::broadcast_bytes(*state, directory, 0);  // where rank 0 writes
  ckpt::save_model(*state, *parallel, directory, 0);
  ckpt::load_model(*reference, directory);
  EXPECT_EQ(max_difference(*parallel, *reference), 0.0);
  const NamedTensors loaded = reference->parameters_and_buffers();
  EXPECT_TRUE(field_named(loaded, "head.w", "the model").is_same(field_named(loaded, "w1", "the model")));
}

// find_unused_parameters as DDP has it: a parameter that no rank used in a synchronising backward keeps its
// gradient as it was (none after a set-to-none zero_grad, so the optimizer leaves it alone; a rank's own
// sum when only no_sync backwards used it); one that some ranks used gets the average, the others giving
// zeros.
TEST(Ddp, UnusedParametersKeepTheirGradientUnlessSomeRankUsedThem) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto model = Model::load_file(tiny_models::mlp_with_unused_parameter(tiny_models::temp_file("unused_by_all.pt")));
  PrepareConfig config;
  config.reducer.find_unused_parameters = true;
  model->prepare(state, config);
  const at::Tensor& unused = field_named(model->named_parameters(), "unused", "the model");
  loop->accumulate();
  loop->backward(output_of(*model, at::randn({2, 8})).sum());
  EXPECT_FALSE(unused.grad().defined()) << "unused on every rank, yet given " << unused.grad();

  loop->accumulate();
  at::Tensor loss = output_of(*model, at::randn({2, 8})).sum();
  if (rank() == world() - 1) loss = loss + unused.sum();
  loop->backward(loss);
  ASSERT_TRUE(unused.grad().defined());
  EXPECT_TRUE(unused.grad().equal(at::full_like(unused, 1.0 / static_cast<double>(world())))) << unused.grad();

  loop->no_sync_begin(*model);
  loop->accumulate();
  loop->backward(output_of(*model, at::randn({2, 8})).sum() + unused.sum() * static_cast<double>(rank() + 1));
  loop->no_sync_end(*model);
  loop->accumulate();
  loop->backward(output_of(*model, at::randn({2, 8})).sum());
  const double own_sum = 1.0 / static_cast<double>(world()) + static_cast<double>(rank() + 1);
  EXPECT_TRUE(unused.grad().equal(at::full_like(unused, own_sum))) << unused.grad();
}

// rank 0's buffers go to the other ranks before a forward only when the forward before it synchronised,
// as in DDP 1.13: at the first micro-step of an accumulation window, never later inside no_sync, and in
// the first evaluation after training (the training forward after that evaluation then sends none).
TEST(Ddp, BuffersAreBroadcastOnlyAfterASynchronisingForward) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto model = Model::load_file(tiny_models::mlp_with_running_mean(tiny_models::temp_file("running_mean.pt")));
  model->prepare(state, PrepareConfig{});
  const at::Tensor& running_mean = field_named(model->named_buffers(), "running_mean", "the model");
  auto* group = state->group("count");
  at::manual_seed(31 + rank());  // each rank its own batches, so that the running means part
  auto collectives_in_forward = [&](bool grad_enabled) {
    const int64_t before = group->collectives_started();
    const auto output = model->forward({at::randn({4, 8})}, {}, grad_enabled).values.front().second;
    const int64_t started = group->collectives_started() - before;
    if (grad_enabled) loop->backward(output.sum());
    return started;
  };
  auto same_on_every_rank = [&] {
    const auto all = distributed::gather(*state, running_mean.unsqueeze(0));
    return all[0].equal(all[world() - 1]);
  };
  loop->accumulate();
  const int64_t broadcast = collectives_in_forward(true);  // the first forward's: what one broadcast starts
  EXPECT_GT(broadcast, 0) << "the first forward";
  loop->no_sync_begin(*model);
  loop->accumulate();
  EXPECT_EQ(collectives_in_forward(true), broadcast) << "the first forward of the no_sync scope, after a synchronising one";
  EXPECT_EQ(collectives_in_forward(true), 0) << "a forward after one inside no_sync";
  loop->no_sync_end(*model);
  loop->accumulate();
  EXPECT_EQ(collectives_in_forward(true), 0) << "the synchronising forward that ends the window";
  EXPECT_FALSE(same_on_every_rank());
  model->train(false);
  EXPECT_EQ(collectives_in_forward(false), broadcast) << "the first evaluation after a synchronising forward";
  EXPECT_TRUE(same_on_every_rank());
  EXPECT_EQ(collectives_in_forward(false), 0) << "a second evaluation";
  model->train(true);
  loop->accumulate();
  EXPECT_EQ(collectives_in_forward(true), 0) << "the training forward after an evaluation";
  loop->accumulate();
  EXPECT_EQ(collectives_in_forward(true), broadcast) << "the training forward after a synchronising one";
}

// gradient_as_bucket_view: the averaged gradients are the buckets' memory (two parameters of one bucket
// share a storage), and training still equals one process on the global batch.
TEST(Ddp, GradientsAsBucketViewsShareTheBucketAndTrainTheSame) {
  auto loop = std::make_shared<TrainingLoop>(state);
  PrepareConfig prepare;
  prepare.reducer.gradient_as_bucket_view = true;
  OptimizerConfig config;
  config.lr = 0.05;
  config.momentum = 0.9;
  auto parallel = trained(loop, "bucket_view", "sgd", config, prepare);
  at::manual_seed(17);
  for (int64_t step = 0; step < 5; ++step) {
    const auto x = at::randn({4 * world(), 8});
    const auto y = at::randn({4 * world(), 4});
    loop->accumulate();
    loop->backward(at::mse_loss(output_of(*parallel.model, my_rows(x)), my_rows(y)));
    const auto& parameters = parallel.model->named_parameters();
    EXPECT_TRUE(parameters[0].second.grad().is_alias_of(parameters[1].second.grad()));  // w1, b1: one bucket
    parallel.optimizer->step();
    parallel.optimizer->zero_grad();
    at::mse_loss(output_of(*parallel.reference, x), y).backward();
    parallel.reference_optimizer->step();
    parallel.reference_optimizer->zero_grad();
  }
  EXPECT_LT(max_difference(*parallel.model, *parallel.reference), 1e-6);
}

// Parameters whose sizes are no multiple of 4 (an MLP 8-13-4) leave gaps between their slots in a bucket: a
// gradient that is a bucket view still starts on a 16-byte boundary, as a tensor of its own does (CUDA's
// vectorised reductions, a norm among them, split the elements by their address's alignment), and the
// averages, in the slots or in the gradients, are the global batch's gradients.
TEST(Ddp, BucketSlotsStartOn16BytesAndTheGapsChangeNoAverage) {
  for (const bool as_view : {true, false}) {
    auto loop = std::make_shared<TrainingLoop>(state);
    const std::string tag = as_view ? "aligned_view" : "aligned_copy";
    auto model = Model::load_file(tiny_models::wide_mlp(tiny_models::temp_file(tag + ".pt"), 13));
    auto reference = Model::load_file(tiny_models::wide_mlp(tiny_models::temp_file(tag + "_reference.pt"), 13));
    PrepareConfig config;
    config.reducer.gradient_as_bucket_view = as_view;
    model->prepare(state, config);
    at::manual_seed(9);
    for (int step = 0; step < 2; ++step) {
      const auto x = at::randn({4 * world(), 8});
      loop->accumulate();
      loop->backward(output_of(*model, my_rows(x)).pow(2).mean());
      output_of(*reference, x).pow(2).mean().backward();
      const auto parameters = trainable(*model);
      const auto expected = trainable(*reference);
      for (size_t i = 0; i < parameters.size(); ++i) {
        const at::Tensor grad = parameters[i].second.grad();
        if (as_view) EXPECT_EQ(reinterpret_cast<uintptr_t>(grad.data_ptr()) % 16, 0u) << parameters[i].first;
        EXPECT_LT((grad - expected[i].second.grad()).abs().max().item<double>(), 1e-6) << parameters[i].first << " " << tag;
        parameters[i].second.mutable_grad().zero_();
        expected[i].second.mutable_grad().zero_();
      }
    }
  }
}

// static_graph: a parameter no backward reaches is allowed without find_unused_parameters; a backward that
// leaves other parameters without gradient than the first one did is an error naming both sets.
TEST(Ddp, StaticGraphAllowsTheSameUnusedParametersEveryTime) {
  auto loop = std::make_shared<TrainingLoop>(state);
  PrepareConfig prepare;
  prepare.reducer.static_graph = true;
  auto model = Model::load_file(tiny_models::mlp_with_unused_parameter(tiny_models::temp_file("static.pt")));
  model->prepare(state, prepare);
  for (int step = 0; step < 3; ++step) {
    loop->accumulate();
    loop->backward(output_of(*model, at::randn({2, 8})).sum());
  }
  EXPECT_TRUE(model->named_parameters().front().second.grad().defined());
  const auto& unused = field_named(model->named_parameters(), "unused", "the model");
  EXPECT_FALSE(unused.grad().defined()) << "no rank ever used it, yet it was given " << unused.grad();
  loop->accumulate();
  try {
    loop->backward(output_of(*model, at::randn({2, 8})).sum() + unused.sum());
    FAIL() << "no error";
  } catch (const std::exception& error) {  // thrown inside autograd's engine, which may rewrap it
    EXPECT_NE(std::string(error.what()).find("from the first backward's (unused) to none"), std::string::npos)
        << error.what();
  }
}

// no_sync as a scope: a backward inside it starts no all-reduce and leaves each rank its own gradient; the
// next synchronising backward averages the sum, exactly as one process summing both full-batch gradients.
TEST(Ddp, NoSyncScopeAccumulatesLocallyUntilTheNextSyncedBackward) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto parallel = load_mlp("no_sync");
  parallel->prepare(state, PrepareConfig{});
  auto reference = load_mlp("no_sync_reference");
  at::manual_seed(23);
  const auto x1 = at::randn({4 * world(), 8}), y1 = at::randn({4 * world(), 4});
  const auto x2 = at::randn({4 * world(), 8}), y2 = at::randn({4 * world(), 4});
  loop->accumulate();
  loop->no_sync_begin(*parallel);
  const int64_t before = state->group("count")->collectives_started();
  loop->backward(at::mse_loss(output_of(*parallel, my_rows(x1)), my_rows(y1)));
  EXPECT_EQ(state->group("count")->collectives_started(), before);
  const auto local = parallel->named_parameters().front().second.grad().clone();
  const auto all = distributed::gather(*state, local.unsqueeze(0));
  EXPECT_FALSE(all[0].equal(all[1]));  // each rank kept its own gradient
  expect_error(Code::InvalidState, "already in a no_sync scope", [&] { loop->no_sync_begin(*parallel); });
  loop->no_sync_end(*parallel);
  expect_error(Code::InvalidState, "not in a no_sync scope", [&] { loop->no_sync_end(*parallel); });
  loop->accumulate();
  loop->backward(at::mse_loss(output_of(*parallel, my_rows(x2)), my_rows(y2)));
  at::mse_loss(output_of(*reference, x1), y1).backward();
  at::mse_loss(output_of(*reference, x2), y2).backward();
  for (size_t i = 0; i < reference->named_parameters().size(); ++i) {
    EXPECT_TRUE(at::allclose(parallel->named_parameters()[i].second.grad(), reference->named_parameters()[i].second.grad(),
                             1e-5, 1e-6))
        << reference->named_parameters()[i].first;
  }
  auto unprepared = load_mlp("no_sync_unprepared");
  expect_error(Code::InvalidArgument, "not prepared with this state", [&] { loop->no_sync_begin(*unprepared); });
}

TEST(Ddp, SchedulerStepsOncePerProcessAfterEachOptimizerStep) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto scheduled = linear_schedule(loop, "scheduler");
  loop->accumulate();
  loop->backward(output_of(*scheduled.model, at::randn({2, 8})).sum());
  scheduled.optimizer->step();
  scheduled.scheduler->step();
  EXPECT_NEAR(scheduled.optimizer->optimizer().lr(0), 1.0 - static_cast<double>(world()) / 20.0, 1e-12);
}

// One micro-batch as a training loop runs it: forward, backward, then the optimizer's and the scheduler's
// steps (with the metric when there is one), each acting only when gradients are synchronised.
void train_micro_batch(Model& model, AcceleratedOptimizer& optimizer, AcceleratedScheduler& scheduler,
                       std::optional<double> metric = std::nullopt) {
  auto loop = optimizer.training_loop();
  loop->accumulate();
  loop->backward(output_of(model, at::randn({2, 8})).sum());
  optimizer.step();
  scheduler.step(metric);
  optimizer.zero_grad();
}

// Accelerate's rule (reference 4.2) on this launch: after each real optimizer step the schedule moves
// num_processes steps, or one with split_batches; it does not move while gradients accumulate. The lr is
// warmup_stable_decay's (2 warmup, 3 stable, 10 linear decay steps) at that count.
TEST(SchedulerRule, TheScheduleMovesByTheProcessCountUnlessSplitBatches) {
  const auto expected_lr = [](int64_t n) {
    if (n < 2) return 0.1 * static_cast<double>(n) / 2;
    if (n < 5) return 0.1;
    return n < 15 ? 0.1 * static_cast<double>(15 - n) / 10 : 0.0;
  };
  for (bool split : {false, true}) {
    SCOPED_TRACE("split_batches=" + std::to_string(split) + " processes=" + std::to_string(world()));
    auto model = load_mlp("scheduler_rule");
    model->prepare(state, PrepareConfig{});
    auto loop = std::make_shared<TrainingLoop>(state);
    OptimizerConfig config;
    config.lr = 0.1;
    auto optimizer = std::make_shared<AcceleratedOptimizer>(loop, std::make_unique<Optimizer>("sgd", trainable(*model), config));
    SchedulerConfig schedule;
    schedule.warmup_steps = 2;
    schedule.num_stable_steps = 3;
    schedule.num_decay_steps = 10;
    schedule.decay_type = "linear";
    AcceleratedScheduler scheduler(
        optimizer, std::make_unique<Scheduler>(optimizer->optimizer(), "warmup_stable_decay", schedule), split);
    const int64_t per_optimizer_step = split ? 1 : world();
    const int64_t accumulation = loop->gradient_accumulation_steps();
    state->gradient_state().set_step(0);
    for (int64_t optimizer_step = 1; optimizer_step <= 6; ++optimizer_step) {
      for (int64_t micro = 1; micro <= accumulation; ++micro) {
        train_micro_batch(*model, *optimizer, scheduler);
        const int64_t done = optimizer_step - (micro < accumulation ? 1 : 0);
        EXPECT_EQ(scheduler.scheduler().step_count(), done * per_optimizer_step) << "micro-batch " << micro;
        EXPECT_NEAR(optimizer->optimizer().lr(0), expected_lr(done * per_optimizer_step), 1e-15);
      }
    }
  }
}

// The same rule with a metric: reduce_on_plateau (patience 3) counts num_processes steps per call unless
// split_batches, as Accelerate passes the metric to each of its steps.
TEST(SchedulerRule, AMetricIsCountedOncePerProcessUnlessSplitBatches) {
  for (bool split : {false, true}) {
    SCOPED_TRACE("split_batches=" + std::to_string(split) + " processes=" + std::to_string(world()));
    auto model = load_mlp("scheduler_rule_metric");
    model->prepare(state, PrepareConfig{});
    auto loop = std::make_shared<TrainingLoop>(state);
    OptimizerConfig config;
    config.lr = 0.1;
    auto optimizer = std::make_shared<AcceleratedOptimizer>(loop, std::make_unique<Optimizer>("sgd", trainable(*model), config));
    SchedulerConfig schedule;
    schedule.patience = 3;
    AcceleratedScheduler scheduler(
        optimizer, std::make_unique<Scheduler>(optimizer->optimizer(), "reduce_on_plateau", schedule), split);
    const int64_t per_optimizer_step = split ? 1 : world();
    state->gradient_state().set_step(0);
    int64_t optimizer_steps = 0;
    while (optimizer->optimizer().lr(0) == 0.1 && optimizer_steps < 10) {
      for (int64_t micro = 0; micro < loop->gradient_accumulation_steps(); ++micro) {
        train_micro_batch(*model, *optimizer, scheduler, 1.0);
      }
      ++optimizer_steps;
    }
    // One step sets the best metric, the next patience + 1 = 4 do not improve on it and reduce.
    EXPECT_EQ(optimizer_steps, (5 + per_optimizer_step - 1) / per_optimizer_step);
    EXPECT_EQ(scheduler.scheduler().step_count(), optimizer_steps * per_optimizer_step);
    EXPECT_NEAR(optimizer->optimizer().lr(0), 0.01, 1e-17);
  }
}

// With ACCEL_STEP_SCHEDULER_WITH_OPTIMIZER=0 (and 2 accumulation steps, 2 processes): the schedule moves one
// step per call of step(), on micro-batches that do not sync as on those that do, never num_processes.
TEST(SchedulerPerCall, EveryCallIsOneStepWhateverTheOptimizerDid) {
  auto loop = std::make_shared<TrainingLoop>(state);
  ASSERT_FALSE(state->options().get_bool("step_scheduler_with_optimizer"));
  auto scheduled = linear_schedule(loop, "scheduler_per_call");
  state->gradient_state().set_step(0);
  for (int64_t call = 1; call <= 5; ++call) {
    train_micro_batch(*scheduled.model, *scheduled.optimizer, *scheduled.scheduler);
    EXPECT_EQ(scheduled.scheduler->scheduler().step_count(), call);
    EXPECT_NEAR(scheduled.optimizer->optimizer().lr(0), 1.0 - static_cast<double>(call) / 20.0, 1e-12);
  }
}

// The reference 2.4 schedule: 5 batches, 2 accumulation steps → sync F, T, F, T, T, no all-reduce when F.
TEST(Accumulation, SyncPatternFollowsTheLoaderAndSkipsAllReduces) {
  auto loop = std::make_shared<TrainingLoop>(state);
  ASSERT_EQ(loop->gradient_accumulation_steps(), 2);
  auto model = load_mlp("pattern");
  model->prepare(state, PrepareConfig{});
  auto dataset = std::make_shared<data::TensorDataset>(NamedTensors{{"x", at::randn({10 * world(), 8})}});
  data::LoaderConfig config;
  config.batch_size = 2;
  data::Loader loader(state, dataset, config);
  std::vector<bool> pattern;
  while (auto batch = loader.next()) {
    loop->accumulate();
    pattern.push_back(state->sync_gradients());
    const int64_t before = state->group("count")->collectives_started();
    loop->backward(output_of(*model, batch->front().second).sum());
    const int64_t launched = state->group("count")->collectives_started() - before;
    if (state->sync_gradients()) {
      EXPECT_GT(launched, 0);
    } else {
      EXPECT_EQ(launched, 0);
    }
  }
  EXPECT_EQ(pattern, (std::vector<bool>{false, true, false, true, true}));
}

// With ACCEL_SYNC_EACH_BATCH=1 as well: sync_gradients keeps its pattern, but every backward all-reduces.
TEST(SyncEachBatch, EveryBackwardAllReducesWhileTheOptimizerStillAccumulates) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto model = load_mlp("sync_each_batch");
  model->prepare(state, PrepareConfig{});
  state->gradient_state().set_step(0);
  std::vector<bool> pattern;
  for (int step = 0; step < 4; ++step) {
    loop->accumulate();
    pattern.push_back(state->sync_gradients());
    const int64_t before = state->group("count")->collectives_started();
    loop->backward(output_of(*model, at::randn({2, 8})).sum());
    EXPECT_GT(state->group("count")->collectives_started() - before, 0) << "step " << step;
  }
  EXPECT_EQ(pattern, (std::vector<bool>{false, true, false, true}));
}

TEST(Accumulation, MicroBatchesEqualOneBatchTwiceAsLarge) {
  auto loop = std::make_shared<TrainingLoop>(state);
  OptimizerConfig config;
  config.lr = 0.1;
  config.momentum = 0.9;
  auto trainee = trained(loop, "accumulate", "sgd", config);
  auto& parallel = trainee.model;
  auto& reference = trainee.reference;
  auto& optimizer = *trainee.optimizer;
  auto& reference_optimizer = *trainee.reference_optimizer;
  at::manual_seed(5);
  state->gradient_state().set_step(0);
  for (int64_t step = 0; step < 6; ++step) {
    const auto first = at::randn({2 * world(), 8}), second = at::randn({2 * world(), 8});
    const auto first_y = at::randn({2 * world(), 4}), second_y = at::randn({2 * world(), 4});
    for (const auto& [x, y] : {std::make_pair(first, first_y), std::make_pair(second, second_y)}) {
      loop->accumulate();
      loop->backward(at::mse_loss(output_of(*parallel, my_rows(x)), my_rows(y)));
      optimizer.step();
      optimizer.zero_grad();
    }
    at::mse_loss(output_of(*reference, at::cat({first, second})), at::cat({first_y, second_y})).backward();
    reference_optimizer.step();
    reference_optimizer.zero_grad();
  }
  EXPECT_LT(max_difference(*parallel, *reference), 1e-6);
}

// Two models and two optimizers in one accelerator, accumulating over both (2 processes, 2 micro-batches a
// step): each trains as one process on the whole batch would.
TEST(Accumulation, TwoModelsAndTwoOptimizersAccumulateTogether) {
  auto loop = std::make_shared<TrainingLoop>(state);
  OptimizerConfig config;
  config.lr = 0.1;
  config.momentum = 0.9;
  auto first = trained(loop, "two_first", "sgd", config);
  auto second = trained(loop, "two_second", "adam", config);
  at::manual_seed(31);
  state->gradient_state().set_step(0);
  for (int64_t step = 0; step < 4; ++step) {
    const auto xs = at::randn({2, 2 * world(), 8}), ys = at::randn({2, 2 * world(), 4});
    for (int64_t micro = 0; micro < 2; ++micro) {
      loop->accumulate();
      const auto x = my_rows(xs[micro]), y = my_rows(ys[micro]);
      loop->backward(at::mse_loss(output_of(*first.model, x), y));
      loop->backward(at::mse_loss(output_of(*second.model, x), -y));
      for (auto* one : {&first, &second}) {
        one->optimizer->step();
        one->optimizer->zero_grad();
      }
    }
    const auto x = xs.reshape({-1, 8}), y = ys.reshape({-1, 4});
    at::mse_loss(output_of(*first.reference, x), y).backward();
    at::mse_loss(output_of(*second.reference, x), -y).backward();
    for (auto* one : {&first, &second}) {
      one->reference_optimizer->step();
      one->reference_optimizer->zero_grad();
    }
  }
  EXPECT_LT(max_difference(*first.model, *first.reference), 1e-6);
  EXPECT_LT(max_difference(*second.model, *second.reference), 1e-6);
}

// Cross-entropy over micro-batches holding different numbers of items on each rank (rank r's micro-batch m
// has 1 + 2r + 3m rows): backward_with_items, given the global item count, trains exactly as one process
// on the whole batch with the mean loss; plain backward (each micro-batch's mean weighing the same) does not.
TEST(Accumulation, ItemCountNormalisationEqualsTheFullBatchMean) {
  auto loop = std::make_shared<TrainingLoop>(state);
  const int64_t accumulation = loop->gradient_accumulation_steps();
  ASSERT_EQ(accumulation, 2);
  auto by_items = load_mlp("items");
  by_items->prepare(state, PrepareConfig{});
  auto by_means = load_mlp("items_means");
  by_means->prepare(state, PrepareConfig{});
  auto reference = load_mlp("items_reference");
  OptimizerConfig config;
  config.lr = 0.5;
  AcceleratedOptimizer items_optimizer(loop, std::make_unique<Optimizer>("sgd", trainable(*by_items), config));
  AcceleratedOptimizer means_optimizer(loop, std::make_unique<Optimizer>("sgd", trainable(*by_means), config));
  Optimizer reference_optimizer("sgd", trainable(*reference), config);
  const auto rows = [](int64_t r, int64_t m) { return 1 + 2 * r + 3 * m; };
  at::manual_seed(11);
  state->gradient_state().set_step(0);
  for (int64_t step = 0; step < 4; ++step) {
    std::vector<at::Tensor> xs, ys, all_x, all_y;
    int64_t num_items = 0;
    for (int64_t m = 0; m < accumulation; ++m) {
      for (int64_t r = 0; r < world(); ++r) {
        const auto x = at::randn({rows(r, m), 8});
        const auto y = at::randint(4, {rows(r, m)}, at::kLong);
        all_x.push_back(x);
        all_y.push_back(y);
        num_items += rows(r, m);
        if (r == rank()) {
          xs.push_back(x);
          ys.push_back(y);
        }
      }
    }
    for (int64_t m = 0; m < accumulation; ++m) {
      loop->accumulate();
      loop->backward_with_items(
          at::cross_entropy_loss(output_of(*by_items, xs[m]), ys[m], {}, at::Reduction::Sum), static_cast<size_t>(num_items));
      loop->backward(at::cross_entropy_loss(output_of(*by_means, xs[m]), ys[m]));
      items_optimizer.step();
      items_optimizer.zero_grad();
      means_optimizer.step();
      means_optimizer.zero_grad();
    }
    at::cross_entropy_loss(output_of(*reference, at::cat(all_x)), at::cat(all_y)).backward();
    reference_optimizer.step();
    reference_optimizer.zero_grad();
  }
  EXPECT_LT(max_difference(*by_items, *reference), 1e-6);
  EXPECT_GT(max_difference(*by_means, *reference), 1e-4);
  expect_error(Code::InvalidArgument, "number of items", [&] {
    loop->backward_with_items(output_of(*by_items, at::randn({2, 8})).sum(), 0);
  });
}

// One process, ACCEL_MIXED_PRECISION=fp16 with ACCEL_INIT_SCALE=1024, ACCEL_GROWTH_FACTOR=4,
// ACCEL_BACKOFF_FACTOR=0.25 and ACCEL_GROWTH_INTERVAL=3: GradScalerKwargs reach the scaler.
TEST(GradScalerKwargs, TheStateSettingsDriveTheScale) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto model = load_mlp("scaler_kwargs");
  model->prepare(state, PrepareConfig{});
  ASSERT_NE(loop->scaler(), nullptr);
  AcceleratedOptimizer optimizer(loop, std::make_unique<Optimizer>("sgd", trainable(*model), OptimizerConfig{}));
  EXPECT_EQ(optimizer.loss_scale(), 1024.0);
  auto step = [&](bool overflow) {
    loop->accumulate();
    loop->backward(at::mse_loss(output_of(*model, at::randn({4, 8})), at::randn({4, 4})));
    if (overflow) model->named_parameters().front().second.mutable_grad()[0][0] = INFINITY;
    optimizer.step();
    optimizer.zero_grad();
  };
  step(false);
  step(false);
  EXPECT_EQ(optimizer.loss_scale(), 1024.0);
  step(false);
  EXPECT_EQ(optimizer.loss_scale(), 4096.0);
  step(true);
  EXPECT_TRUE(optimizer.step_was_skipped());
  EXPECT_EQ(optimizer.loss_scale(), 1024.0);
}

// Two processes with ACCEL_RNG_TYPES=generator,torch: when a loader starts an epoch every rank takes rank
// 0's state of torch's default generator (Accelerate's synchronize_rng_states), so draws agree after it.
TEST(RngTypes, TorchsGeneratorIsRankZerosOnceAnEpochStarts) {
  at::manual_seed(100 + static_cast<uint64_t>(rank()));
  auto dataset = std::make_shared<data::TensorDataset>(NamedTensors{{"x", at::arange(8)}});
  data::LoaderConfig config;
  config.batch_size = 2;
  data::Loader loader(state, dataset, config);
  const auto before = at::rand({4});
  ASSERT_TRUE(loader.next().has_value());
  const auto after = at::rand({4});
  const auto gathered_before = distributed::gather(*state, before.reshape({1, 4}));
  const auto gathered_after = distributed::gather(*state, after.reshape({1, 4}));
  EXPECT_FALSE(gathered_before[0].equal(gathered_before[1]));
  EXPECT_TRUE(gathered_after[0].equal(gathered_after[1]));
  at::manual_seed(100);
  at::rand({4});
  EXPECT_TRUE(after.equal(at::rand({4})));  // rank 0's sequence, continued
}

// One process, ACCEL_MIXED_PRECISION=fp16: the scaler of reference section 7 drives the optimizer.
TEST(Fp16, AnOverflowSkipsTheStepHalvesTheScaleAndFreezesTheScheduler) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto model = load_mlp("fp16");
  model->prepare(state, PrepareConfig{});
  ASSERT_NE(loop->scaler(), nullptr);
  OptimizerConfig config;
  config.lr = 0.01;
  auto optimizer = std::make_shared<AcceleratedOptimizer>(loop, std::make_unique<Optimizer>("sgd", trainable(*model), config));
  SchedulerConfig schedule;
  schedule.total_steps = 10000;
  AcceleratedScheduler scheduler(optimizer, std::make_unique<Scheduler>(optimizer->optimizer(), "linear", schedule), /*split_batches=*/false);
  auto step = [&](bool overflow) {
    loop->accumulate();
    loop->backward(at::mse_loss(output_of(*model, at::randn({4, 8})), at::randn({4, 4})));
    if (overflow) model->named_parameters().front().second.mutable_grad()[0][0] = INFINITY;
    optimizer->step();
    scheduler.step();
    optimizer->zero_grad();
  };
  step(false);
  EXPECT_FALSE(optimizer->step_was_skipped());
  const auto before = model->named_parameters().front().second.clone();
  const double lr = optimizer->optimizer().lr(0);
  const int64_t scheduled = scheduler.scheduler().step_count();
  step(true);
  EXPECT_TRUE(optimizer->step_was_skipped());
  EXPECT_TRUE(model->named_parameters().front().second.equal(before));
  EXPECT_EQ(loop->scaler()->get_scale(), 32768.0);
  EXPECT_EQ(optimizer->optimizer().lr(0), lr);
  EXPECT_EQ(scheduler.scheduler().step_count(), scheduled);
  for (int i = 0; i < 2000; ++i) step(false);
  EXPECT_FALSE(optimizer->step_was_skipped());
  EXPECT_EQ(loop->scaler()->get_scale(), 65536.0);
}

// A GAN-style loop under fp16 (one process, the scaler alone): two models, two optimizers of one
// accelerator. Each optimizer has its own inf check, so an overflow in the discriminator's gradients skips
// only its step; each step updates the scale. Scaling by powers of two is exact, so every step that is not
// skipped moves the weights exactly as unscaled fp32 training does.
TEST(Fp16, TwoModelsAndTwoOptimizersAreScaledApart) {
  auto loop = std::make_shared<TrainingLoop>(state);
  OptimizerConfig sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  OptimizerConfig adamw;
  adamw.lr = 0.01;
  auto generator = trained(loop, "gan_generator", "sgd", sgd);
  auto discriminator = trained(loop, "gan_discriminator", "adamw", adamw);
  const double scale_before = loop->scaler()->get_scale();
  at::manual_seed(29);
  for (int step = 0; step < 5; ++step) {
    const bool overflow = step == 2;
    const auto x = at::randn({4, 8}), y = at::randn({4, 4});
    loop->accumulate();
    loop->backward(at::mse_loss(output_of(*discriminator.model, x), y));
    if (overflow) discriminator.model->named_parameters().front().second.mutable_grad()[0][0] = INFINITY;
    loop->clip_grad_norm(*discriminator.model, 1e9, 2.0);  // unscales the discriminator's optimizer only
    discriminator.optimizer->step();
    discriminator.optimizer->zero_grad();
    loop->backward(at::mse_loss(output_of(*generator.model, x), -y));
    generator.optimizer->step();
    generator.optimizer->zero_grad();
    EXPECT_EQ(discriminator.optimizer->step_was_skipped(), overflow) << "step " << step;
    EXPECT_FALSE(generator.optimizer->step_was_skipped()) << "step " << step;

    at::mse_loss(output_of(*discriminator.reference, x), y).backward();
    if (!overflow) discriminator.reference_optimizer->step();
    discriminator.reference_optimizer->zero_grad();
    at::mse_loss(output_of(*generator.reference, x), -y).backward();
    generator.reference_optimizer->step();
    generator.reference_optimizer->zero_grad();
  }
  EXPECT_EQ(max_difference(*discriminator.model, *discriminator.reference), 0.0);
  EXPECT_EQ(max_difference(*generator.model, *generator.reference), 0.0);
  EXPECT_EQ(loop->scaler()->get_scale(), scale_before / 2);  // one backoff, ten updates in all
}

// One process, ACCEL_MIXED_PRECISION=bf16: forward runs under CPU autocast, outputs come back as fp32
// unless asked otherwise, and training still works.
TEST(Bf16, ForwardRunsInBfloat16AndReturnsFloat32) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto model = load_mlp("bf16");
  model->prepare(state, PrepareConfig{});
  auto reference = load_mlp("bf16_reference");
  at::manual_seed(3);
  const auto x = at::randn({4, 8});
  const auto output = output_of(*model, x);
  EXPECT_EQ(output.scalar_type(), at::kFloat);
  const auto exact = output_of(*reference, x);
  const double difference = (output - exact).abs().max().item<double>();
  EXPECT_GT(difference, 0.0);   // bf16 matmuls round differently from fp32 ones
  EXPECT_LT(difference, 0.1);
  auto converted = Model::load_file(tiny_models::matmul_only(tiny_models::temp_file("bf16_matmul.pt")));
  converted->prepare(state, PrepareConfig{});
  EXPECT_EQ(output_of(*converted, x).scalar_type(), at::kFloat);
  auto raw = Model::load_file(tiny_models::matmul_only(tiny_models::temp_file("bf16_matmul_raw.pt")));
  PrepareConfig keep;
  keep.keep_low_precision_outputs = true;
  raw->prepare(state, keep);
  EXPECT_EQ(output_of(*raw, x).scalar_type(), at::kBFloat16);
  EXPECT_EQ(loop->scaler(), nullptr);
  loop->accumulate();
  loop->backward(at::mse_loss(output, at::zeros_like(output)));
  for (const auto& parameter : model->named_parameters()) {
    EXPECT_TRUE(parameter.second.grad().defined());
    EXPECT_EQ(parameter.second.grad().scalar_type(), at::kFloat) << parameter.first;
  }
}

// ACCEL_MIXED_PRECISION=bf16: the explicit autocast scope covers LibTorch code outside forward (a matmul
// gives bf16 inside, fp32 after), nests with forward's own scope, and an end without begin is refused.
TEST(Bf16, AutocastScopeCoversCodeOutsideForwardAndNests) {
  const auto a = at::ones({2, 2});
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
  autocast_begin(*state);
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kBFloat16);
  auto model = load_mlp("bf16_scope");
  model->prepare(state, PrepareConfig{});
  output_of(*model, at::randn({2, 8}));
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kBFloat16);  // forward's scope restored this one's
  autocast_begin(*state);
  autocast_end();
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kBFloat16);
  autocast_end();
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
  expect_error(Code::InvalidState, "without a matching begin", [] { autocast_end(); });
}

}  // namespace
