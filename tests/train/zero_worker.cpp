// ZeRO stages 1 and 2 on every rank under `accel launch`, through the C++ core: the same 50 optimizer
// steps taken by zero_stage 0, 1 and 2 models side by side give bit-identical weights (SGD with momentum
// and AdamW, gradient clipping on, accumulation as ACCEL_GRADIENT_ACCUMULATION_STEPS says), every
// element is stepped by exactly one rank, and stage 2 keeps only a rank's own gradients. Run by
// tests/CMakeLists.txt on 1, 2 and 3 processes with accumulation 1 and 3, and on 2 and 3 through Gloo.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "core_worker.hpp"
#include "distributed/collectives/collectives.hpp"
#include "distributed/group/process_group.hpp"
#include "expect_error.hpp"
#include "tiny_models.hpp"
#include "train/training_loop.hpp"
#include "train/training_options.hpp"
#include "train/optim/zero_optimizer.hpp"

namespace {

using namespace accel;
using namespace accel::train;

using core_worker::load_mlp;
using core_worker::rank;
using core_worker::state;
using core_worker::world;

constexpr int64_t kSteps = 50;
constexpr double kMaxNorm = 0.05;  // small enough that most steps clip

// The two bucket layouts: b2 alone then the rest together (3 ranks: w1, w2 and b1 go to three owners), and
// one bucket per parameter (ranks that own nothing in a bucket).
// offload: ZeRO-Offload (zero_cpu_offload), the optimizer stepping host copies of the pieces.
PrepareConfig layout(int32_t zero_stage, bool bucket_per_parameter, bool offload = false) {
  PrepareConfig config;
  config.reducer.zero_stage = zero_stage;
  config.reducer.cpu_offload = offload;
  config.reducer.first_bucket_bytes = 4;
  config.reducer.bucket_bytes = bucket_per_parameter ? 4 : 1 << 20;
  return config;
}

OptimizerConfig optimizer_config_for(const std::string& kind) {
  OptimizerConfig config;
  if (kind == "sgd") {
    config.lr = 0.05;
    config.momentum = 0.9;
  } else {
    config.lr = 0.01;
    config.weight_decay = 0.01;
  }
  return config;
}

// This rank's rows of micro-step `step`'s batch.
at::Tensor rows(int64_t step, int64_t columns, int64_t salt) {
  at::manual_seed(step * 1000 + rank() * 10 + salt);
  return at::randn({16, columns});
}

struct Trained {
  std::shared_ptr<Model> model;
  std::shared_ptr<AcceleratedOptimizer> optimizer;
};

// hidden: the MLP's width; 16 is core_worker's tiny MLP, 131 one whose parameters are cut into pieces of
// odd lengths (kernels' tails inside a piece).
Trained make(const std::shared_ptr<TrainingLoop>& loop, const std::string& tag, int32_t zero_stage,
             const std::string& kind, bool bucket_per_parameter, int64_t hidden = 16, bool offload = false) {
  Trained trained{hidden == 16 ? load_mlp(tag)
                               : Model::load_file(tiny_models::wide_mlp(tiny_models::temp_file(tag + ".pt"), hidden)),
                  nullptr};
  trained.model->prepare(state, layout(zero_stage, bucket_per_parameter, offload));
  trained.optimizer = prepare_optimizer(loop, *trained.model, kind, optimizer_config_for(kind));
  return trained;
}

// kSteps optimizer steps of every model on the same micro-batches, Accelerate's loop: accumulate,
// backward, and on a synchronising micro-step clip, step and zero_grad.
void train_side_by_side(const std::shared_ptr<TrainingLoop>& loop, std::vector<Trained>& models) {
  const int64_t micro_steps = kSteps * loop->gradient_accumulation_steps();
  for (int64_t step = 0; step < micro_steps; ++step) {
    loop->accumulate();
    const auto x = rows(step, 8, 0);
    const auto y = rows(step, 4, 1);
    for (auto& trained : models) {
      const auto output = trained.model->forward({x}, {}, true).values.front().second;
      loop->backward(at::mse_loss(output, y));
    }
    if (!state->sync_gradients()) continue;
    for (auto& trained : models) {
      loop->clip_grad_norm(*trained.model, kMaxNorm, 2.0);
      trained.optimizer->step();
      trained.optimizer->zero_grad();
    }
  }
}

void expect_bit_identical(const Model& expected, const Model& actual, const std::string& what) {
  const auto a = expected.trainable_parameters();
  const auto b = actual.trainable_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i].second, b[i].second))
        << what << ": " << a[i].first << " differs by up to " << (a[i].second - b[i].second).abs().max().item<double>();
  }
}

class BitIdentical : public ::testing::TestWithParam<std::tuple<std::string, bool, int64_t>> {};

// With zero_cpu_offload (models 3 and 4: stages 1 and 2) the optimizer steps host copies of the pieces, never
// the parameters' memory (on one process too, where the one process owns every element), and the weights are
// the same bits.
TEST_P(BitIdentical, StagesOneAndTwoGiveStageZerosWeights) {
  auto loop = std::make_shared<TrainingLoop>(state);
  const auto& [kind, bucket_per_parameter, hidden] = GetParam();
  std::vector<Trained> models;
  for (int32_t model = 0; model <= 4; ++model) {
    const int32_t stage = model <= 2 ? model : model - 2;
    models.push_back(make(loop, kind + std::to_string(model) + (bucket_per_parameter ? "p" : "b") + std::to_string(hidden),
                          stage, kind, bucket_per_parameter, hidden, model > 2));
  }
  for (int32_t model = 3; model <= 4; ++model) {
    const ZeroShard* shard = models[model].optimizer->optimizer().zero_shard();
    ASSERT_NE(shard, nullptr) << "offloaded, model " << model << " has no ZeRO split";
    if (world() == 1) EXPECT_EQ(shard->views().size(), models[model].model->trainable_parameters().size());
    for (size_t k = 0; k < shard->views().size(); ++k) {
      const at::Tensor& parameter = shard->parameters()[shard->pieces()[k].parameter].second;
      EXPECT_FALSE(shard->views()[k].storage().is_alias_of(parameter.storage()))
          << "offloaded, piece " << k << " is a view of its parameter";
    }
  }
  train_side_by_side(loop, models);
  // The weights moved (a test where nothing steps would pass trivially).
  auto untouched = load_mlp("untouched");
  EXPECT_FALSE(at::equal(untouched->trainable_parameters().front().second,
                         models[0].model->trainable_parameters().front().second));
  expect_bit_identical(*models[0].model, *models[1].model, kind + " zero_stage 1");
  expect_bit_identical(*models[0].model, *models[2].model, kind + " zero_stage 2");
  expect_bit_identical(*models[0].model, *models[3].model, kind + " zero_stage 1 offloaded");
  expect_bit_identical(*models[0].model, *models[4].model, kind + " zero_stage 2 offloaded");
  // And every rank holds the same weights.
  for (const auto& parameter : models[2].model->trainable_parameters()) {
    auto mine = parameter.second.detach().clone();
    auto rank0 = mine.clone();
    distributed::broadcast(*state, rank0, 0);
    EXPECT_TRUE(at::equal(mine, rank0)) << parameter.first << " differs from rank 0's";
  }
}

INSTANTIATE_TEST_SUITE_P(Zero, BitIdentical,
                         ::testing::Combine(::testing::Values(std::string("sgd"), std::string("adamw")),
                                            ::testing::Bool(), ::testing::Values(int64_t{16}, int64_t{131})));

int64_t bytes_of(const at::Tensor& tensor) { return tensor.numel() * static_cast<int64_t>(tensor.element_size()); }

// Each element's state lives on exactly one rank, its owner: the ranks' state bytes add up to stage 0's,
// and each rank holds exactly its own pieces' moments. An element stepped by two ranks (or by none) breaks
// the sum.
TEST(Zero, EveryElementIsSteppedByExactlyOneRank) {
  auto loop = std::make_shared<TrainingLoop>(state);
  for (int32_t stage = 1; stage <= 2; ++stage) {
    std::vector<Trained> models{make(loop, "once0_" + std::to_string(stage), 0, "adamw", true),
                                make(loop, "once_" + std::to_string(stage), stage, "adamw", true)};
    train_side_by_side(loop, models);
    const int64_t whole = models[0].optimizer->optimizer().state_bytes();
    const int64_t mine = models[1].optimizer->optimizer().state_bytes();
    const auto all = distributed::gather(*state, at::full({1}, mine, at::kLong));
    EXPECT_EQ(all.sum().item<int64_t>(), whole) << "zero_stage " << stage << ": the ranks' state bytes " << all;
    const Model& model = *models[1].model;
    int64_t owned = 0;
    if (world() == 1) {
      EXPECT_EQ(model.zero_partition(), nullptr);  // one process: zero_stage means nothing
      owned = whole / 2;
    } else {
      for (const auto& piece : model.zero_partition()->pieces_of(rank())) owned += piece.numel * 4;
    }
    EXPECT_EQ(mine, 2 * owned) << "AdamW keeps two moments of each element it steps";
  }
}

// A checkpoint's ZeRO optimizer state is each rank's own pieces (nothing gathered, so no rank holds more than
// its share): every rank's parts together load into a stage 0 optimizer as the whole state save_state()
// gathers; a rank's part alone covers some parameters partly and is refused naming one, the state unchanged.
TEST(Zero, EachRankSavesItsOwnPiecesOfTheState) {
  auto loop = std::make_shared<TrainingLoop>(state);
  if (world() == 1) GTEST_SKIP() << "one process has nothing to split";
  auto split = make(loop, "parts2", 2, "adamw", false, 131);
  auto whole = make(loop, "parts0", 0, "adamw", false, 131);
  std::vector<Trained> models{split};
  train_side_by_side(loop, models);
  Optimizer& optimizer = split.optimizer->optimizer();
  const auto saved = optimizer.save_state_per_process();
  const int64_t own_state = optimizer.state_bytes();
  EXPECT_LT(static_cast<int64_t>(saved.own.size()), own_state + (1 << 16)) << "a rank's part is about its own state";

  std::vector<std::string> parts;
  std::vector<std::string> indexes;
  for (int32_t source = 0; source < world(); ++source) {
    std::string bytes = source == rank() ? saved.own : std::string();
    std::string index = source == rank() ? saved.own_index : std::string();
    distributed::broadcast_bytes(*state, bytes, source);
    distributed::broadcast_bytes(*state, index, source);
    parts.push_back(std::move(bytes));
    indexes.push_back(std::move(index));
  }
  {
    at::NoGradGuard no_grad;
    const auto from = split.model->trainable_parameters();
    const auto to = whole.model->trainable_parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].second.copy_(from[i].second);
  }
  whole.optimizer->optimizer().load_state(saved.shared, parts);
  const auto all = distributed::gather(*state, at::full({1}, own_state, at::kLong));
  EXPECT_EQ(whole.optimizer->optimizer().state_bytes(), all.sum().item<int64_t>());
  // The same state stepped on: stage 0 goes on as stage 2 does, bit for bit, only if every piece came back.
  std::vector<Trained> both{split, whole};
  train_side_by_side(loop, both);
  expect_bit_identical(*whole.model, *split.model, "stage 0 loaded from the stage 2 parts");

  // Every rank's parts loaded back into the stage 2 optimizer: each rank cuts its own pieces out of them as
  // they are read, and holds exactly what it saved.
  optimizer.load_state(saved.shared, parts);
  const std::string before = optimizer.save_state_per_process().own;
  EXPECT_EQ(before, saved.own) << "the pieces cut from every rank's parts";
  EXPECT_EQ(optimizer.state_bytes(), own_state);
  // With the parts' indexes, a rank of the same split reads its own part only.
  std::vector<size_t> read;
  optimizer.load_state(optimizer.read_state(
      saved.shared, [&](size_t process) { read.push_back(process); return parts[process]; }, parts.size(),
      [&](size_t process) { return std::optional<std::string>(indexes[process]); }));
  EXPECT_EQ(read, std::vector<size_t>{static_cast<size_t>(rank())});
  EXPECT_EQ(optimizer.save_state_per_process().own, saved.own) << "the pieces cut from this rank's part";
  indexes[rank()] = "0 x damaged";
  expect_error(Code::InvalidArgument, "its piece index is damaged", [&] {
    optimizer.read_state(saved.shared, [&](size_t process) { return parts[process]; }, parts.size(),
                         [&](size_t process) { return std::optional<std::string>(indexes[process]); });
  });
  expect_error(Code::InvalidArgument, "once (a process's part is missing or repeated)",
               [&] { optimizer.load_state(saved.shared, {saved.own}); });
  expect_error(Code::InvalidArgument, "no process's part was given", [&] { optimizer.load_state(saved.shared); });
  EXPECT_EQ(optimizer.state_bytes(), own_state);
  EXPECT_EQ(optimizer.save_state_per_process().own, before) << "a refused load changed the state";
}

// Between a synchronising backward and the step, a stage 2 rank holds the averaged gradients of its own
// elements, and no others: a parameter it owns whole has its gradient, one it owns a piece of has the
// piece held for the optimizer, the others none.
TEST(Zero, StageTwoKeepsOnlyItsOwnGradients) {
  auto loop = std::make_shared<TrainingLoop>(state);
  if (world() == 1) GTEST_SKIP() << "one process has nothing to split";
  auto reference = make(loop, "grads0", 0, "sgd", true);
  auto split = make(loop, "grads2", 2, "sgd", true);
  state->gradient_state().reset();
  // One synchronising backward of each.
  for (int64_t micro = 0; micro < loop->gradient_accumulation_steps(); ++micro) {
    loop->accumulate();
    for (auto* trained : {&reference, &split}) {
      const auto output = trained->model->forward({rows(micro, 8, 0)}, {}, true).values.front().second;
      loop->backward(at::mse_loss(output, rows(micro, 4, 1)));
    }
  }
  ASSERT_TRUE(state->sync_gradients());
  const ZeroPartition& partition = *split.model->zero_partition();
  const auto expected = reference.model->trainable_parameters();
  const auto actual = split.model->trainable_parameters();
  // Through Gloo the buckets are all-reduced as under stage 0 (for the same sums) and stay, with the whole
  // gradients of the parameters the rank owns a piece of.
  const bool scattered = state->group("test")->uses_shared_memory();
  const auto pieces = partition.pieces_of(rank());
  std::vector<bool> has_piece(actual.size(), false);
  for (const auto& piece : pieces) has_piece[piece.parameter] = true;
  bool some_split = false;
  for (size_t i = 0; i < actual.size(); ++i) {
    const int32_t owner = partition.whole_owner(i);
    some_split = some_split || owner == -1;
    if (owner == rank() || (!scattered && has_piece[i])) {
      ASSERT_TRUE(actual[i].second.grad().defined()) << actual[i].first;
      EXPECT_TRUE(at::equal(actual[i].second.grad(), expected[i].second.grad())) << actual[i].first;
    } else {
      EXPECT_FALSE(actual[i].second.grad().defined()) << actual[i].first << " is not this rank's whole";
    }
  }
  EXPECT_TRUE(some_split) << "the one-bucket-per-parameter layout cuts w1 between the ranks";
  const auto& held = *partition.held_pieces;
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (pieces[k].whole || !scattered) continue;
    ASSERT_LT(k, held.size());
    ASSERT_TRUE(held[k].defined()) << actual[pieces[k].parameter].first << "'s piece";
    const auto reference_piece = expected[pieces[k].parameter].second.grad().reshape({-1}).narrow(0, pieces[k].begin, pieces[k].numel);
    EXPECT_TRUE(at::equal(held[k], reference_piece)) << actual[pieces[k].parameter].first << "'s piece";
  }
  // The figures of accel_model_grad_sync_stat: stage 0 holds every gradient and a bucket copy of each;
  // stage 2 its chunk of each bucket.
  int64_t parameter_bytes = 0, kept_bytes = 0, chunk_bytes = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    parameter_bytes += bytes_of(expected[i].second);
    if (has_piece[i]) kept_bytes += bytes_of(expected[i].second);
  }
  for (const auto& bucket : partition.buckets) chunk_bytes += bucket.chunk * 4;
  EXPECT_EQ(reference.model->grad_sync_report().gradient_bytes, 2 * parameter_bytes);
  EXPECT_EQ(split.model->grad_sync_report().gradient_bytes, scattered ? chunk_bytes : kept_bytes + parameter_bytes);
  reference.optimizer->step();
  split.optimizer->step();
  EXPECT_EQ(reference.model->grad_sync_report().optimizer_state_bytes, parameter_bytes);  // SGD's momentum
  EXPECT_EQ(split.model->grad_sync_report().optimizer_state_bytes, split.optimizer->optimizer().state_bytes());
  EXPECT_LT(split.optimizer->optimizer().state_bytes(), parameter_bytes);
  reference.optimizer->zero_grad();
  split.optimizer->zero_grad();
  for (const auto& piece : held) EXPECT_FALSE(piece.defined()) << "zero_grad drops the held pieces";
}

// A model of the caller's tensors (LibTorch's autograd standing in for an eager runtime), stepped by accel's
// optimizer under stages 1 and 2, offloaded or not: the weights of the TorchScript model trained with zero_stage 0.
struct CallerModel {
  std::vector<at::Tensor> tensors;
  std::shared_ptr<Model> model;
  std::shared_ptr<AcceleratedOptimizer> optimizer;
};

CallerModel caller_copy_of(const std::shared_ptr<TrainingLoop>& loop, const Model& reference, int32_t zero_stage,
                           const std::string& kind, bool offload) {
  CallerModel caller;
  NamedTensors named;
  for (const auto& [name, tensor] : reference.named_parameters()) {
    caller.tensors.push_back(tensor.detach().clone().requires_grad_());
    named.emplace_back(name, caller.tensors.back());
  }
  caller.model = Model::from_tensors(named, std::vector<bool>(named.size(), true), {});
  caller.model->prepare(state, layout(zero_stage, false, offload));
  for (size_t i = 0; i < caller.tensors.size(); ++i) caller.tensors[i].mutable_grad() = caller.model->grad_view(i).detach();
  caller.optimizer = prepare_optimizer(loop, *caller.model, kind, optimizer_config_for(kind));
  return caller;
}

TEST(Zero, CallersTensorsSteppedByAccelsOptimizer) {
  auto loop = std::make_shared<TrainingLoop>(state);
  for (const std::string kind : {"sgd", "adamw"}) {
    SCOPED_TRACE(kind);
    Trained script = make(loop, "host_script_" + kind, 0, kind, false);
    std::vector<CallerModel> callers;
    for (const bool offload : {false, true}) {
      for (int32_t stage = 1; stage <= 2; ++stage) callers.push_back(caller_copy_of(loop, *script.model, stage, kind, offload));
    }
    for (int64_t step = 0; step < 20 * loop->gradient_accumulation_steps(); ++step) {
      loop->accumulate();
      const auto x = rows(step, 8, 0), y = rows(step, 4, 1);
      loop->backward(at::mse_loss(script.model->forward({x}, {}, true).values.front().second, y));
      for (auto& caller : callers) {
        caller.model->begin_forward(true);
        const auto& t = caller.tensors;
        const auto output = at::matmul(at::relu(at::matmul(x, t[0]) + t[1]), t[2]) + t[3];
        (at::mse_loss(output, y) / static_cast<double>(loop->gradient_accumulation_steps())).backward();
        for (size_t i = t.size(); i-- > 0;) caller.model->grad_ready(i);
        caller.model->end_backward();
      }
      if (!state->sync_gradients()) continue;
      loop->clip_grad_norm(*script.model, kMaxNorm, 2.0);
      script.optimizer->step();
      script.optimizer->zero_grad();
      for (auto& caller : callers) {
        loop->clip_grad_norm(*caller.model, kMaxNorm, 2.0);
        caller.optimizer->step();
        caller.optimizer->zero_grad();
      }
    }
    for (size_t c = 0; c < callers.size(); ++c) {
      const auto& expected = script.model->named_parameters();
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(expected[i].second.detach().equal(callers[c].tensors[i].detach()))
            << "zero_stage " << c % 2 + 1 << (c >= 2 ? " offloaded: " : ": ") << expected[i].first;
      }
    }
  }
}

// A parameter without elements has no piece on any process, offloaded too (on one process as on several).
TEST(Zero, OffloadedStepsPassOverAParameterWithoutElements) {
  auto loop = std::make_shared<TrainingLoop>(state);
  std::vector<at::Tensor> tensors{at::ones({4, 4}).requires_grad_(), at::ones({0}).requires_grad_()};
  auto model = Model::from_tensors({{"w", tensors[0]}, {"empty", tensors[1]}}, {true, true}, {});
  model->prepare(state, layout(2, false, true));
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].mutable_grad() = model->grad_view(i).detach();
  auto optimizer = prepare_optimizer(loop, *model, "sgd", optimizer_config_for("sgd"));
  state->gradient_state().reset();
  const int64_t micro_steps = loop->gradient_accumulation_steps();
  for (int64_t micro = 0; micro < micro_steps; ++micro) {
    loop->accumulate();
    model->begin_forward(true);
    ((tensors[0].sum() + tensors[1].sum()) / static_cast<double>(micro_steps)).backward();
    for (size_t i = tensors.size(); i-- > 0;) model->grad_ready(i);
    model->end_backward();
  }
  ASSERT_TRUE(state->sync_gradients());
  optimizer->step();
  EXPECT_TRUE(tensors[0].detach().equal(at::full({4, 4}, 1.0 - 0.05))) << tensors[0];
}

// The caller's own optimizer alone (no accel optimizer, external or not, over the model) cannot step a split
// model: refused at the first backward, naming why and the way out.
TEST(Zero, CallersOwnOptimizerIsRefused) {
  if (world() == 1) GTEST_SKIP() << "one process splits nothing";
  auto reference = load_mlp("host_refused");
  NamedTensors named;
  for (const auto& [name, tensor] : reference->named_parameters()) named.emplace_back(name, tensor.detach().clone().requires_grad_());
  auto model = Model::from_tensors(named, std::vector<bool>(named.size(), true), {});
  model->prepare(state, layout(1, false));
  expect_error(Code::Unsupported, "accel_optimizer_new_external", [&] { model->end_backward(); });
}

// Under the fp16 scaler (ACCEL_MIXED_PRECISION=fp16) a stage 2 rank unscales only its own gradients (offloaded,
// its host copy of them): an inf in one rank's share must skip every rank's step (a rank stepping alone would
// also wait forever in the parameter all-gather).
TEST(Zero, AnOverflowOnOneRankSkipsEveryRanksStep) {
  auto loop = std::make_shared<TrainingLoop>(state);
  if (loop->scaler() == nullptr || world() == 1) GTEST_SKIP() << "needs fp16 loss scaling on several processes";
  for (const bool offload : {false, true}) {
    SCOPED_TRACE(offload ? "offloaded" : "on the model's device");
    auto trained = make(loop, offload ? "overflow_offloaded" : "overflow", 2, "sgd", false, 16, offload);
    state->gradient_state().reset();
    for (int64_t micro = 0; micro < loop->gradient_accumulation_steps(); ++micro) {
      loop->accumulate();
      const auto output = trained.model->forward({rows(micro, 8, 0)}, {}, true).values.front().second;
      loop->backward(at::mse_loss(output, rows(micro, 4, 1)));
    }
    const auto trainable = trained.model->trainable_parameters();
    const size_t poisoned = trainable.size() - 1;
    const int32_t owner = trained.model->zero_partition()->whole_owner(poisoned);
    ASSERT_NE(owner, -1) << "the poisoned parameter is owned whole by one rank";
    if (owner == rank()) trainable[poisoned].second.grad().view({-1})[0] = INFINITY;
    std::vector<at::Tensor> before;
    for (const auto& parameter : trainable) before.push_back(parameter.second.detach().clone());
    trained.optimizer->step();
    EXPECT_TRUE(trained.optimizer->step_was_skipped());
    for (size_t i = 0; i < trainable.size(); ++i) {
      EXPECT_TRUE(at::equal(before[i], trainable[i].second)) << trainable[i].first << " was stepped";
    }
    trained.optimizer->zero_grad();
  }
}

TEST(Zero, RefusesWhatItCannotDo) {
  auto loop = std::make_shared<TrainingLoop>(state);
  if (world() == 1) GTEST_SKIP() << "one process builds no reducer";
  auto unused = layout(2, false);
  unused.reducer.find_unused_parameters = true;
  expect_error(Code::Unsupported, "zero_stage 2 with find_unused_parameters",
               [&] { load_mlp("refused")->prepare(state, unused); });
  auto compressed = layout(2, false);
  compressed.reducer.compression = GradCompression::Fp16;
  expect_error(Code::Unsupported, "zero_stage 2 with grad_compression",
               [&] { load_mlp("refused2")->prepare(state, compressed); });
  auto trained = make(loop, "capture", 1, "adamw", false);
  expect_error(Code::Unsupported, "CUDA graph", [&] { trained.optimizer->optimizer().capturable(); });
  // A piece is a view of its parameter's memory, which a transposed tensor does not lay out in order.
  NamedTensors transposed{{"w", at::randn({8, 4}).t().requires_grad_()}};
  auto caller = Model::from_tensors(transposed, {true}, {});
  caller->prepare(state, layout(1, false));
  expect_error(Code::Unsupported, "parameter 'w' is not contiguous",
               [&] { prepare_optimizer(loop, *caller, "sgd", optimizer_config_for("sgd")); });
}

TEST(Zero, StageIsAnOptionOfZeroToThree) {
  Options options({&prepare_option_scope()});
  options.set("zero_stage", OptionValue(int64_t{4}));
  expect_error(Code::BadOptionValue, "option zero_stage: 4 is not a ZeRO stage", [&] { prepare_config(&options); });
  options.set("zero_stage", OptionValue(int64_t{3}));
  EXPECT_EQ(prepare_config(&options).reducer.zero_stage, 3);
  EXPECT_FALSE(prepare_config(&options).reducer.unit_param_dtype.has_value());
  options.set("zero_param_dtype", OptionValue(std::string("bf16")));
  options.set("zero_reduce_dtype", OptionValue(std::string("fp32")));
  EXPECT_EQ(prepare_config(&options).reducer.unit_param_dtype, at::kBFloat16);
  EXPECT_EQ(prepare_config(&options).reducer.unit_reduce_dtype, at::kFloat);
  options.set("zero_stage", OptionValue(int64_t{2}));
  expect_error(Code::BadOptionValue, "option zero_param_dtype: 'bf16' is zero_stage 3's mixed precision",
               [&] { prepare_config(&options); });
}

TEST(Zero, CpuOffloadIsZerosStagesOneToThree) {
  Options options({&prepare_option_scope()});
  options.set("zero_stage", OptionValue(int64_t{3}));
  EXPECT_FALSE(prepare_config(&options).reducer.cpu_offload);
  options.set("zero_cpu_offload", OptionValue(true));
  for (int64_t stage = 1; stage <= 3; ++stage) {
    options.set("zero_stage", OptionValue(stage));
    EXPECT_TRUE(prepare_config(&options).reducer.cpu_offload);
  }
  options.set("zero_stage", OptionValue(int64_t{0}));
  expect_error(Code::BadOptionValue, "option zero_cpu_offload: what is offloaded is ZeRO's share",
               [&] { prepare_config(&options); });
}

// checkpoint_model "auto" (the default): in pieces when the parameters are sharded (zero_stage 3 on several
// processes), whole otherwise; either asked for explicitly at any stage.
TEST(Zero, StageThreeCheckpointsInPiecesUnlessAskedOtherwise) {
  const auto in_pieces = [](int64_t stage, const char* model_files) {
    Options options({&prepare_option_scope()});
    options.set("zero_stage", OptionValue(stage));
    if (model_files != nullptr) options.set("checkpoint_model", OptionValue(std::string(model_files)));
    auto model = load_mlp("pieces_" + std::to_string(stage) + (model_files == nullptr ? "" : model_files));
    model->prepare(state, prepare_config(&options));
    return model->checkpoint_in_pieces();
  };
  EXPECT_EQ(in_pieces(3, nullptr), world() > 1) << "sharded only on several processes";
  EXPECT_FALSE(in_pieces(2, nullptr));
  EXPECT_FALSE(in_pieces(0, "auto"));
  EXPECT_FALSE(in_pieces(3, "whole"));
  EXPECT_TRUE(in_pieces(1, "sharded"));
  expect_error(Code::BadOptionValue, "checkpoint_model", [&] { in_pieces(3, "pieces"); });
}

// Driven by tests/train/zero_checkpoint_test.sh (skipped otherwise): ZERO_CKPT_PHASE "save" trains 10
// steps with zero_stage ZERO_CKPT_STAGE (ZERO_CKPT_OFFLOAD 1: zero_cpu_offload), saves a checkpoint, trains 10 more and writes its weights; "resume"
// loads that checkpoint (another stage and number of processes), trains the same 10 steps and must reach
// the very same weights. Every rank trains on the same rows, so that the average over 2 ranks is the one
// rank's gradient exactly and 1 and 2 processes take the same steps.
std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

void train_steps(const std::shared_ptr<TrainingLoop>& loop, Trained& trained, int64_t first, int64_t count) {
  for (int64_t step = first; step < first + count; ++step) {
    loop->accumulate();
    at::manual_seed(step);
    const auto x = at::randn({16, 8}), y = at::randn({16, 4});
    loop->backward(at::mse_loss(trained.model->forward({x}, {}, true).values.front().second, y));
    loop->clip_grad_norm(*trained.model, kMaxNorm, 2.0);
    trained.optimizer->step();
    trained.optimizer->zero_grad();
  }
}

std::string weight_bytes(const Model& model) {
  std::string bytes;
  for (const auto& parameter : model.trainable_parameters()) {
    const auto values = parameter.second.detach().contiguous();
    bytes.append(static_cast<const char*>(values.data_ptr()), values.numel() * values.element_size());
  }
  return bytes;
}

TEST(ZeroCheckpoint, ResumesUnderAnotherStageAndWorldSize) {
  auto loop = std::make_shared<TrainingLoop>(state);
  const std::string phase = env("ZERO_CKPT_PHASE"), directory = env("ZERO_CKPT_DIR");
  if (phase.empty()) GTEST_SKIP() << "run by zero_checkpoint_test.sh";
  ASSERT_EQ(loop->gradient_accumulation_steps(), 1);
  Trained trained = make(loop, "checkpointed", std::stoi(env("ZERO_CKPT_STAGE")), "adamw", false, 131,
                         env("ZERO_CKPT_OFFLOAD") == "1");
  ckpt::CheckpointObjects objects;
  objects.models = {trained.model.get()};
  objects.optimizers = {trained.optimizer.get()};
  if (phase == "save") {
    train_steps(loop, trained, 0, 10);
    ckpt::save_state(state, directory + "/checkpoint", objects);
    train_steps(loop, trained, 10, 10);
    if (rank() == 0) std::ofstream(directory + "/never_stopped.bin", std::ios::binary) << weight_bytes(*trained.model);
    return;
  }
  if (phase == "missing-part") {
    // A ZeRO optimizer's state is in every saving rank's folder: without one, nothing is loaded.
    const std::string before = weight_bytes(*trained.model);
    expect_error(Code::Io, "rank1/states.safetensors", [&] { ckpt::load_state(state, directory + "/checkpoint", objects); });
    EXPECT_TRUE(before == weight_bytes(*trained.model)) << "a refused load changed the weights";
    return;
  }
  ckpt::load_state(state, directory + "/checkpoint", objects);
  train_steps(loop, trained, 10, 10);
  std::ifstream in(directory + "/never_stopped.bin", std::ios::binary);
  const std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(expected.empty());
  EXPECT_TRUE(expected == weight_bytes(*trained.model)) << "the resumed run's weights differ from the run that never stopped";
}

}  // namespace
