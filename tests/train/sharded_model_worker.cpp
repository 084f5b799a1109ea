// ZeRO stage 3 on a model of the caller's tensors (Model::set_units, gather_unit, reduce_unit), on every rank
// under `accel launch`: the caller here is LibTorch's autograd on tensors the test owns, driving the units as
// an eager runtime's hooks do (accel._torch_sharded for torch). It must train to the very weights the same
// tensors reach under stage 0, hold only its share between steps, save and load whole weights through
// the checkpoint code (and checkpoints in each rank's pieces), and refuse what the units' protocol forbids. Registered with 1, 2 and 3 processes,
// and 2 over Gloo (where the reduction is an all-reduce of which each rank keeps its chunk).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/model_pieces.hpp"
#include "ckpt/save_model.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core_worker.hpp"
#include "distributed/collectives/collectives.hpp"
#include "expect_error.hpp"
#include "formats/safetensors.hpp"
#include "temp_dir.hpp"
#include "tiny_models.hpp"
#include "train/optim/optimizer.hpp"
#include "train/training_loop.hpp"

namespace {

using namespace accel;
using namespace accel::train;

using core_worker::load_mlp;
using core_worker::my_rows;
using core_worker::test_optimizer;
using core_worker::rank;
using core_worker::state;
using core_worker::world;

// The caller's side: its tensors (leaves with autograd), the model made of them and, under stage 3, one
// buffer per unit that the tensors are views of while the unit is in use.
struct Caller {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  std::vector<std::vector<int64_t>> shapes;  // the tensors' own, which releasing them forgets
  std::shared_ptr<Model> model;
  std::vector<at::Tensor> buffers;  // per unit; empty: stage 0
  std::vector<at::Tensor> accumulated;  // per unit: gradients of backwards that did not synchronise

  at::Tensor forward(const at::Tensor& x) const {
    return at::matmul(at::relu(at::matmul(x, tensors[0]) + tensors[1]), tensors[2]) + tensors[3];
  }

  bool sharded() const { return !buffers.empty(); }

  // Every unit gathered, its tensors views of its buffer; with prefetching, the last unit's gather started
  // first, so that it travels while the others are gathered.
  void gather(bool prefetching = false) {
    for (size_t u = 0; u < buffers.size(); ++u) buffers[u] = at::empty({model->sharded_units()->unit_numel(u)});
    if (prefetching) model->prefetch_unit(buffers.size() - 1, buffers.back());
    for (size_t u = 0; u < buffers.size(); ++u) model->gather_unit(u, buffers[u]);
    for (size_t i = 0; sharded() && i < tensors.size(); ++i) {
      const auto [unit, offset] = model->parameter_place(i);
      const int64_t numel = c10::multiply_integers(shapes[i]);
      tensors[i].set_data(buffers[unit].narrow(0, offset, numel).view(shapes[i]));
    }
  }

  // The tensors released: no values between steps.
  void release() {
    for (auto& tensor : tensors) tensor.set_data(at::empty({0}));
    for (auto& buffer : buffers) buffer = at::Tensor();
  }

  // One backward as the caller runs it: under stage 3 each unit's gradients are laid out as its buffer and
  // reduced, last layer's unit first as backward reaches it; then the end.
  void backward(const at::Tensor& loss) {
    loss.backward();
    if (!sharded()) {
      for (size_t i = tensors.size(); i-- > 0;) model->grad_ready(i);
    }
    accumulated.resize(buffers.size());
    for (size_t u = buffers.size(); u-- > 0;) {
      auto& gradients = accumulated[u];
      if (!gradients.defined()) gradients = at::zeros({model->sharded_units()->unit_numel(u)});
      for (size_t i = 0; i < tensors.size(); ++i) {
        const auto [unit, offset] = model->parameter_place(i);
        if (unit == u) gradients.narrow(0, offset, tensors[i].numel()).add_(tensors[i].grad().view({-1}));
      }
      // An accumulating backward keeps them for the next one.
      if (model->reduce_unit(u, gradients)) gradients = at::Tensor();
    }
    for (size_t i = 0; sharded() && i < tensors.size(); ++i) tensors[i].mutable_grad() = at::Tensor();
    model->end_backward();
  }
};

// The MLP's weights in tensors the caller owns, prepared; with stage 3 its layers are units 0 and 1. With
// values_on_process_zero_only, the other processes' tensors are one element expanded to each shape (no memory
// for values: a model built on the meta device); offload: cpu_offload.
Caller caller_copy_of(const Model& reference, int32_t zero_stage, bool values_on_process_zero_only = false,
                      bool offload = false) {
  Caller caller;
  NamedTensors named;
  for (const auto& [name, tensor] : reference.named_parameters()) {
    caller.names.push_back(name);
    const bool shape_only = values_on_process_zero_only && rank() != 0;
    caller.tensors.push_back((shape_only ? at::empty({}).expand(tensor.sizes()) : tensor.detach().clone()).requires_grad_());
    caller.shapes.push_back(tensor.sizes().vec());
    named.emplace_back(name, caller.tensors.back());
  }
  caller.model = Model::from_tensors(named, std::vector<bool>(named.size(), true), {});
  PrepareConfig prepare;
  prepare.reducer.zero_stage = zero_stage;
  prepare.reducer.cpu_offload = offload;
  if (zero_stage == 3) caller.model->set_units({0, 0, 1, 1});
  caller.model->prepare(state, prepare);
  if (caller.model->sharded_units() != nullptr) {
    caller.buffers.resize(caller.model->sharded_units()->unit_count());
    caller.release();
  } else {
    for (size_t i = 0; i < caller.tensors.size(); ++i) caller.tensors[i].mutable_grad() = caller.model->grad_view(i).detach();
  }
  return caller;
}

// body(kind, accumulation) for SGD with momentum and AdamW, each with accumulation 1 and 3 (the loop's
// setting for the length of the call).
void for_kinds_and_accumulations(TrainingLoop& loop, const std::function<void(const std::string&, int64_t)>& body) {
  for (const std::string kind : {"sgd", "adamw"}) {
    for (const int64_t accumulation : {1, 3}) {
      SCOPED_TRACE(kind + ", accumulation " + std::to_string(accumulation));
      loop.set_gradient_accumulation_steps(accumulation);
      body(kind, accumulation);
      loop.set_gradient_accumulation_steps(1);
    }
  }
}

// 20 steps, accumulation 1 and 3, clipping on, SGD with momentum and AdamW: stage 3's weights are stage 0's
// bit for bit, and between steps the caller holds no parameter memory. Every other step prefetches a unit
// and starts a prefetch the forward never uses, which the backward's end must forget: gathered after the
// step, it would give the weights of before. On one process stage 3 offloaded (the units holding the model in
// host memory; without cpu_offload there is nothing for it to do, and the model is not cut).
TEST(ShardedModel, TrainsToStageZerosWeights) {
  auto loop = std::make_shared<TrainingLoop>(state);
  if (world() == 1) EXPECT_EQ(caller_copy_of(*load_mlp("not_offloaded"), 3).model->sharded_units(), nullptr);
  for_kinds_and_accumulations(*loop, [&](const std::string& kind, int64_t accumulation) {
    const auto reference = load_mlp("sharded_" + kind);
    auto whole = caller_copy_of(*reference, 0);
    auto sharded = caller_copy_of(*reference, 3, false, /*offload=*/world() == 1);
    ASSERT_EQ(sharded.model->sharded_units()->unit_count(), 2u);
    auto whole_optimizer = test_optimizer(loop, *whole.model, kind);
    auto sharded_optimizer = test_optimizer(loop, *sharded.model, kind);
    at::manual_seed(3);
    const auto inputs = at::randn({20 * accumulation, 4 * world(), 8});
    const auto targets = at::randn({20 * accumulation, 4 * world(), 4});
    for (int64_t step = 0; step < 20 * accumulation; ++step) {
      loop->accumulate();
      const auto x = my_rows(inputs[step]), y = my_rows(targets[step]);
      for (auto* caller : {&whole, &sharded}) {
        caller->model->begin_forward(true);
        const bool prefetching = caller->sharded() && step % 2 == 1;
        caller->gather(prefetching);
        at::Tensor unused;
        if (prefetching) {
          unused = at::empty({caller->model->sharded_units()->unit_numel(0)});
          caller->model->prefetch_unit(0, unused);
        }
        caller->backward(at::mse_loss(caller->forward(x), y));
        if (caller->sharded()) caller->release();
        if (state->sync_gradients()) loop->clip_grad_norm(*caller->model, 0.05, 2.0);
      }
      for (auto* optimizer : {&whole_optimizer, &sharded_optimizer}) {
        (*optimizer)->step();
        (*optimizer)->zero_grad();
      }
    }
    for (const auto& tensor : sharded.tensors) EXPECT_EQ(tensor.storage().nbytes(), 0u);
    // A rank holds its chunk of each unit's gradients: half (world 2) or a third of the layouts, padded.
    int64_t layouts = 0;
    for (size_t u = 0; u < sharded.buffers.size(); ++u) layouts += sharded.model->sharded_units()->unit_numel(u);
    EXPECT_EQ(sharded.model->grad_sync_report().gradient_bytes, layouts / world() * 4);
    sharded.gather();
    for (size_t i = 0; i < whole.tensors.size(); ++i) {
      EXPECT_TRUE(whole.tensors[i].detach().equal(sharded.tensors[i].detach())) << whole.names[i];
    }
    EXPECT_FALSE(whole.tensors[0].detach().equal(reference->named_parameters()[0].second)) << "nothing trained";
  });
}

// Under stage 3 prepare takes a unit at a time from process 0's tensors, never reading the others' (here one
// element expanded to each shape), and lets go of the caller's memory of each unit: after prepare every
// process gathers process 0's values, and the tensors it was given hold no storage. A tensor prepare would
// write into (stage 0's, or a frozen one) may not be so: every process fails naming it.
TEST(ShardedModel, PrepareReadsProcessZerosValuesOnly) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  const auto reference = load_mlp("sharded_shape_only");
  auto sharded = caller_copy_of(*reference, 3, /*values_on_process_zero_only=*/true);
  for (const auto& tensor : sharded.tensors) EXPECT_EQ(tensor.storage().nbytes(), 0u);
  sharded.gather();
  for (size_t i = 0; i < sharded.tensors.size(); ++i) {
    EXPECT_TRUE(sharded.tensors[i].detach().equal(reference->named_parameters()[i].second)) << sharded.names[i];
  }
  for (const int32_t zero_stage : {0, 2}) {
    expect_error(Code::ShapeMismatch, "'w1' [8, 16] Float with elements sharing memory (expanded)",
                 [&] { caller_copy_of(*reference, zero_stage, /*values_on_process_zero_only=*/true); });
  }
}

// save_model gathers the units one at a time (every rank) while process 0 writes them, into one file or
// into shards with an index, and a stage 0 model loads the files to the same values; loading them into a
// sharded model puts each rank's share back.
TEST(ShardedModel, SavedWeightsAreWholeAndLoadBackIntoShares) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  const auto reference = load_mlp("sharded_saved");
  auto sharded = caller_copy_of(*reference, 3);
  auto whole = caller_copy_of(*reference, 0);
  std::string directory = test_support::temp_directory() + "/sharded_model_" + std::to_string(getpid());
  distributed::broadcast_bytes(*state, directory, 0);
  ckpt::save_model(*state, *sharded.model, directory, 0);
  for (auto& tensor : whole.tensors) tensor.detach().zero_();
  ckpt::load_model(*whole.model, directory);
  for (size_t i = 0; i < whole.tensors.size(); ++i) {
    EXPECT_TRUE(whole.tensors[i].detach().equal(reference->named_parameters()[i].second)) << whole.names[i];
  }
  // Sharded files (max_shard_size 200 bytes: a tensor or two each), streamed unit by unit into several files.
  distributed::all_or_none(*state, [] {}, "reading the saved model");
  ckpt::save_model(*state, *sharded.model, directory, 200);
  EXPECT_FALSE(path_exists(directory + "/model.safetensors"));
  for (auto& tensor : whole.tensors) tensor.detach().zero_();
  ckpt::load_model(*whole.model, directory);
  for (size_t i = 0; i < whole.tensors.size(); ++i) {
    EXPECT_TRUE(whole.tensors[i].detach().equal(reference->named_parameters()[i].second)) << whole.names[i] << " (shards)";
  }
  for (auto& tensor : whole.tensors) tensor.detach().mul_(2.0);
  // Every rank has read the files before process 0 writes the next ones.
  distributed::all_or_none(*state, [] {}, "reading the saved model");
  ckpt::save_model(*state, *whole.model, directory, 0);
  ckpt::load_model(*sharded.model, directory);
  sharded.gather();
  for (size_t i = 0; i < whole.tensors.size(); ++i) {
    EXPECT_TRUE(sharded.tensors[i].detach().equal(whole.tensors[i].detach())) << whole.names[i];
  }
  distributed::all_or_none(*state, [&] { if (rank() == 0) remove_all(directory); }, "removing the saved model");
}

// Model::set_parameter (a state dict loaded into a prepared model): each rank writes its elements of a whole
// value into its share, converting its dtype and reading it whatever its strides, without a collective, so that
// a gather then holds the value; a stage 0 model's tensor takes it whole. Named errors for the rest.
TEST(ShardedModel, SetParameterWritesEachRanksElementsOfAWholeValue) {
  const auto reference = load_mlp("sharded_set_parameter");
  auto sharded = caller_copy_of(*reference, 3, false, world() == 1);
  auto whole = caller_copy_of(*reference, 0);
  ASSERT_NE(sharded.model->sharded_units(), nullptr);
  std::vector<at::Tensor> values;
  for (size_t i = 0; i < sharded.tensors.size(); ++i) {
    const at::Tensor original = reference->named_parameters()[i].second;
    // Doubles, laid out transposed where there are two dimensions: read as the value, not as its memory.
    const at::Tensor value = original.dim() == 2 ? (original * 3).to(at::kDouble).t().contiguous().t()
                                                 : (original * 3).to(at::kDouble);
    sharded.model->set_parameter(i, value);
    whole.model->set_parameter(i, value);
    values.push_back(value.to(at::kFloat));
  }
  sharded.gather();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_TRUE(sharded.tensors[i].detach().equal(values[i])) << sharded.names[i];
    EXPECT_TRUE(whole.tensors[i].detach().equal(values[i])) << whole.names[i] << " (stage 0)";
  }
  sharded.release();
  expect_error(Code::ShapeMismatch, "'w1' has shape [8, 16], the value [16, 8]",
               [&] { sharded.model->set_parameter(0, at::zeros({16, 8})); });
  expect_error(Code::OutOfRange, "parameter 4 out of range (the model has 4)",
               [&] { sharded.model->set_parameter(4, at::zeros({16})); });
  expect_error(Code::Dtype, "'b1' is Float, the value complex",
               [&] { sharded.model->set_parameter(1, at::zeros({16}, at::kComplexFloat)); });
}

// gather_unit_gradients (FSDP's summon_full_params(with_grads=True)): after a synchronising backward each
// unit's averaged gradients, gathered whole on every rank, are stage 0's bit for bit, and zeros after zero_grad;
// there are none before the first backward (every rank agrees, also one whose chunk of a unit holds only
// alignment: 3 processes and b2's unit). Named errors for the rest.
TEST(ShardedModel, GatheredGradientsAreStageZerosAverages) {
  auto loop = std::make_shared<TrainingLoop>(state);
  const auto reference = load_mlp("sharded_gradients");
  auto whole = caller_copy_of(*reference, 0);
  auto sharded = caller_copy_of(*reference, 3, false, world() == 1);
  auto whole_optimizer = test_optimizer(loop, *whole.model, "sgd");
  auto sharded_optimizer = test_optimizer(loop, *sharded.model, "sgd");
  const auto layout = [&](size_t unit) { return at::empty({sharded.model->sharded_units()->unit_numel(unit)}); };
  at::Tensor gradients = layout(1);
  EXPECT_FALSE(sharded.model->gather_unit_gradients(1, gradients)) << "gradients before any backward";
  EXPECT_TRUE(gradients.eq(0).all().item<bool>());
  at::manual_seed(4);
  const auto inputs = at::randn({4 * world(), 8}), targets = at::randn({4 * world(), 4});
  loop->accumulate();
  ASSERT_TRUE(state->sync_gradients());
  for (auto* caller : {&whole, &sharded}) {
    caller->model->begin_forward(true);
    caller->gather();
    caller->backward(at::mse_loss(caller->forward(my_rows(inputs)), my_rows(targets)));
    if (caller->sharded()) caller->release();
  }
  for (size_t unit = 0; unit < 2; ++unit) {
    gradients = layout(unit);
    ASSERT_TRUE(sharded.model->gather_unit_gradients(unit, gradients)) << "unit " << unit;
    for (size_t i = 0; i < whole.tensors.size(); ++i) {
      const auto [place, offset] = sharded.model->parameter_place(i);
      if (place != unit) continue;
      const at::Tensor expected = whole.tensors[i].grad();
      EXPECT_TRUE(gradients.narrow(0, offset, expected.numel()).view(expected.sizes()).equal(expected)) << whole.names[i];
    }
  }
  expect_error(Code::Dtype, "gather_gradients: unit 0's buffer is Double, its gradients are averaged into its "
                            "parameters' Float",
               [&] { sharded.model->gather_unit_gradients(0, layout(0).to(at::kDouble)); });
  expect_error(Code::OutOfRange, "unit 2 out of range", [&] { sharded.model->gather_unit_gradients(2, gradients); });
  expect_error(Code::InvalidState, "the model is not sharded", [&] { whole.model->gather_unit_gradients(0, gradients); });
  // A model of the caller's tensors keeps its gradient storage: zero_grad zeroes it.
  sharded_optimizer->zero_grad();
  EXPECT_TRUE(sharded.model->gather_unit_gradients(1, gradients));
  EXPECT_TRUE(gradients.eq(0).all().item<bool>()) << "gradients after zero_grad";
}

// save_state of a model set to be saved in pieces: each rank writes its shares into its own folder (the pieces
// of its part are exactly the elements it holds, nothing gathered), and the checkpoint loads into a stage 0
// model, every rank holding the whole weights, and back into the sharded one.
TEST(ShardedModel, ACheckpointInPiecesHoldsEachRanksShares) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  const auto reference = load_mlp("sharded_pieces");
  auto sharded = caller_copy_of(*reference, 3);
  auto whole = caller_copy_of(*reference, 0);
  auto unprepared = Model::from_tensors(reference->named_parameters(), std::vector<bool>(4, true), {});
  expect_error(Code::InvalidState, "not prepared", [&] { unprepared->set_checkpoint_in_pieces(true); });
  std::string directory = test_support::temp_directory() + "/sharded_pieces_" + std::to_string(getpid());
  distributed::broadcast_bytes(*state, directory, 0);
  ckpt::CheckpointObjects saving;
  saving.models = {sharded.model.get()};
  // Chosen on one process only: refused on every process, before anything is written.
  sharded.model->set_checkpoint_in_pieces(rank() == 0);
  expect_error(Code::InvalidArgument, "the processes write the models differently (process 0: 'pieces ', process 1: 'whole ",
               [&] { ckpt::save_state(state, directory, saving); });
  EXPECT_FALSE(path_exists(directory));
  sharded.model->set_checkpoint_in_pieces(true);
  ckpt::save_state(state, directory, saving);
  EXPECT_FALSE(path_exists(directory + "/model.safetensors"));
  const formats::SafetensorsFile part(ckpt::model_part_file(directory, rank(), 0));
  for (size_t i = 0; i < sharded.names.size(); ++i) {
    const auto [begin, share] = sharded.model->sharded_share(sharded.model->named_parameters()[i].second);
    const formats::ArrayView& piece = part.array(sharded.names[i]);
    EXPECT_EQ(piece.nbytes, static_cast<size_t>(share.nbytes())) << sharded.names[i];
    EXPECT_TRUE(formats::copy_to_tensor(piece).equal(share)) << sharded.names[i];
    EXPECT_EQ(part.metadata().at("accel.piece:" + sharded.names[i]).rfind(std::to_string(begin) + " ", 0), 0u);
  }
  ckpt::CheckpointObjects loading;
  loading.models = {whole.model.get()};
  for (auto& tensor : whole.tensors) tensor.detach().zero_();
  ckpt::load_state(state, directory, loading);
  for (size_t i = 0; i < whole.tensors.size(); ++i) {
    EXPECT_TRUE(whole.tensors[i].detach().equal(reference->named_parameters()[i].second)) << whole.names[i];
  }
  for (size_t i = 0; i < sharded.names.size(); ++i) {
    sharded.model->sharded_share(sharded.model->named_parameters()[i].second).second.zero_();
  }
  ckpt::load_state(state, directory, saving);
  sharded.gather();
  for (size_t i = 0; i < sharded.tensors.size(); ++i) {
    EXPECT_TRUE(sharded.tensors[i].detach().equal(reference->named_parameters()[i].second)) << sharded.names[i];
  }
  distributed::all_or_none(*state, [&] { if (rank() == 0) remove_all(directory); }, "removing the checkpoint");
}

// What the units' protocol forbids, named.
TEST(ShardedModel, RefusesWhatTheUnitsDoNotAllow) {
  auto loop = std::make_shared<TrainingLoop>(state);
  const auto reference = load_mlp("sharded_errors");
  auto caller = caller_copy_of(*reference, 3);
  expect_error(Code::InvalidState, "prepared already", [&] { caller.model->set_units({0, 0, 0, 0}); });
  if (world() == 1) {
    EXPECT_EQ(caller.model->sharded_units(), nullptr);
    expect_error(Code::InvalidState, "not sharded", [&] { caller.model->gather_unit(0, at::empty({64})); });
    return;
  }
  const int64_t numel = caller.model->sharded_units()->unit_numel(0);
  expect_error(Code::ShapeMismatch, "must be 1-d and contiguous with " + std::to_string(numel),
               [&] { caller.model->gather_unit(0, at::empty({numel + 1})); });
  expect_error(Code::Dtype, "is Double, its parameters are Float",
               [&] { caller.model->gather_unit(0, at::empty({numel}, at::kDouble)); });
  expect_error(Code::OutOfRange, "unit 2 out of range", [&] { caller.model->gather_unit(2, at::empty({numel})); });
  expect_error(Code::InvalidState, "handed over a unit at a time", [&] { caller.model->grad_view(0); });
  {
    // A prefetch is the gather it started: into its own buffer, or copied into another of its dtype.
    const auto prefetched = at::empty({numel}), other = at::empty({numel}), fresh = at::empty({numel});
    caller.model->prefetch_unit(0, prefetched);
    expect_error(Code::InvalidState, "unit 0 is prefetched already", [&] { caller.model->prefetch_unit(0, other); });
    caller.model->gather_unit(0, fresh);
    EXPECT_TRUE(prefetched.equal(fresh));
    caller.model->prefetch_unit(0, prefetched);
    caller.model->gather_unit(0, other);
    EXPECT_TRUE(other.equal(fresh));
  }
  expect_error(Code::Unsupported, "for_each_gathered_parameter", [&] { caller.model->parameters_and_buffers(); });
  // A synchronising backward must reduce every unit (zeros for one it did not reach) before it ends.
  auto optimizer = test_optimizer(loop, *caller.model, "sgd");
  loop->accumulate();
  caller.model->begin_forward(true);
  caller.model->reduce_unit(1, at::zeros({caller.model->sharded_units()->unit_numel(1)}));
  expect_error(Code::InvalidState, "without the gradients of unit(s) 0", [&] { caller.model->end_backward(); });
  EXPECT_FALSE(state->broken());

  // Ranks whose forwards took different paths: rank 1 gathers unit 1 where rank 0 gathers unit 0, of the
  // same size, so the all-gathers pair; the synchronising backward's end finds it on every rank.
  NamedTensors twins{{"a", at::ones({64})}, {"b", at::ones({64})}};
  auto paths = Model::from_tensors(twins, {true, true}, {});
  paths->set_units({0, 1});
  PrepareConfig sharded;
  sharded.reducer.zero_stage = 3;
  paths->prepare(state, sharded);
  auto paths_optimizer = test_optimizer(loop, *paths, "sgd");
  loop->accumulate();
  paths->begin_forward(true);
  const auto buffer = at::empty({paths->sharded_units()->unit_numel(0)});
  paths->gather_unit(rank() == 1 ? 1 : 0, buffer);
  for (size_t unit : {1, 0}) paths->reduce_unit(unit, at::zeros_like(buffer));
  expect_error(Code::InvalidState, "gathered or reduced different units", [&] { paths->end_backward(); });

  NamedTensors mixed{{"a", at::ones({3})}, {"b", at::ones({3}, at::kDouble)}};
  auto model = Model::from_tensors(mixed, {true, true}, {});
  model->set_units({0, 0});
  PrepareConfig prepare;
  prepare.reducer.zero_stage = 3;
  expect_error(Code::InvalidArgument, "unit 0 holds 'a' (Float) and 'b' (Double)",
               [&] { model->prepare(state, prepare); });
  expect_error(Code::InvalidArgument, "2 units given for 4 parameters",
               [&] { Model::from_tensors(reference->named_parameters(), {true, true, true, true}, {})->set_units({0, 1}); });
  auto script = load_mlp("sharded_script");
  PrepareConfig low = prepare;
  low.reducer.unit_param_dtype = at::kBFloat16;
  expect_error(Code::Unsupported, "zero_param_dtype: a TorchScript model run by accel is gathered in its parameters' dtype",
               [&] { script->prepare(state, low); });
}

// make(tag) of a tiny TorchScript model: `write` (tiny_models') into a file of its own, `name` and the tag, loaded.
std::function<std::shared_ptr<Model>(const std::string&)> tiny_model(std::string (*write)(const std::string&, int),
                                                                      const std::string& name) {
  return [write, name](const std::string& tag) {
    return Model::load_file(write(tiny_models::temp_file(name + "_" + tag + ".pt"), 0));
  };
}

// Trains `whole` (stage 0) and `sharded` (stage 3) side by side, 10 steps per accumulation step with
// clipping, `after_sharded_forward` run between the sharded model's forward and its backward; then `sharded`
// must hold stage 0's weights bit for bit (and no parameter memory between steps or after an evaluation,
// which gives stage 0's output), and differ from `untouched`, the first parameter before training.
void expect_stage_zeros_steps(const std::shared_ptr<TrainingLoop>& loop, Model& whole, Model& sharded,
                              const std::string& kind, int64_t accumulation, const at::Tensor& untouched,
                              const std::function<void()>& after_sharded_forward) {
  auto whole_optimizer = test_optimizer(loop, whole, kind);
  auto sharded_optimizer = test_optimizer(loop, sharded, kind);
  at::manual_seed(5);
  const auto inputs = at::randn({10 * accumulation, 4 * world(), 8});
  const auto targets = at::randn({10 * accumulation, 4 * world(), 4});
  for (int64_t step = 0; step < 10 * accumulation; ++step) {
    loop->accumulate();
    const auto x = my_rows(inputs[step]), y = my_rows(targets[step]);
    for (Model* model : {&whole, &sharded}) {
      const at::Tensor loss = at::mse_loss(model->forward({x}, {}, true).values.front().second, y);
      if (model == &sharded) after_sharded_forward();
      loop->backward(loss);
      if (state->sync_gradients()) loop->clip_grad_norm(*model, 0.05, 2.0);
    }
    for (auto* optimizer : {&whole_optimizer, &sharded_optimizer}) {
      (*optimizer)->step();
      (*optimizer)->zero_grad();
    }
    for (const auto& parameter : sharded.named_parameters()) {
      EXPECT_EQ(parameter.second.storage().nbytes(), 0u) << parameter.first << " held after step " << step;
    }
  }
  std::vector<at::Tensor> values;
  sharded.for_each_gathered_parameter(true, [&](const at::Tensor&, const at::Tensor& value) { values.push_back(value.clone()); });
  const auto expected = whole.trainable_parameters();
  ASSERT_EQ(values.size(), expected.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_TRUE(values[i].equal(expected[i].second))
        << expected[i].first << " differs by up to " << (values[i] - expected[i].second).abs().max().item<float>();
  }
  EXPECT_FALSE(expected[0].second.equal(untouched)) << "nothing trained";
  const auto probe = at::randn({3, 8});
  EXPECT_TRUE(sharded.forward({probe}, {}, false).values.front().second.equal(whole.forward({probe}, {}, false).values.front().second));
  for (const auto& parameter : sharded.named_parameters()) EXPECT_EQ(parameter.second.storage().nbytes(), 0u);
}

// A TorchScript model, `make(tag)` loading a fresh copy, whose forward accel cuts around the children it calls
// under stage 3: `cut` units that lie in a cut child each (each child at most one, the first child it calls
// one), and `held` other units, those of the parameters named in `held_names`. Between a forward and its
// backward only the held units are held (a cut child's were freed after its forward, and are gathered again as
// autograd reaches it), and it takes stage 0's steps bit for bit, with the next child's gathers prefetched
// (AdamW's runs) or not (SGD's).
void expect_cut_units(const std::function<std::shared_ptr<Model>(const std::string&)>& make, int64_t cut,
                      int64_t held, const std::set<std::string>& held_names) {
  auto loop = std::make_shared<TrainingLoop>(state);
  for_kinds_and_accumulations(*loop, [&](const std::string& kind, int64_t accumulation) {
    auto whole = make("whole_" + kind);
    auto sharded = make("sharded_" + kind);
    PrepareConfig stage0, stage3;
    stage3.reducer.zero_stage = 3;
    stage3.reducer.unit_prefetch = kind == "adamw";  // zero_prefetch, on by default
    whole->prepare(state, stage0);
    sharded->prepare(state, stage3);
    ASSERT_EQ(sharded->sharded_units()->unit_count(), static_cast<size_t>(cut + held));
    expect_stage_zeros_steps(loop, *whole, *sharded, kind, accumulation, make("untouched")->named_parameters()[0].second,
                             [&] {
                               for (const auto& [name, parameter] : sharded->named_parameters()) {
                                 if (held_names.count(name) != 0) {
                                   EXPECT_GT(parameter.storage().nbytes(), 0u) << name << " not held into backward";
                                 } else {
                                   EXPECT_EQ(parameter.storage().nbytes(), 0u) << name << " held between forward and backward";
                                 }
                               }
                             });
    // Per step: the held units gathered once, the cut ones in the forward and again in the backward, the
    // held units after the first prefetched as the forward begins, each cut child's next one's as a child's
    // forward begins and its previous one's as a child's backward begins; then an evaluation (the forward's
    // gathers and prefetches) and the weights gathered to compare (each unit's gather after the first in
    // flight while the one before is read, whatever zero_prefetch says).
    const int64_t steps = 10 * accumulation;
    const int64_t forward_prefetches = (cut - 1) + std::max<int64_t>(held - 1, 0);
    const int64_t prefetched = stage3.reducer.unit_prefetch ? (forward_prefetches + cut - 1) * steps + forward_prefetches : 0;
    const GradSyncReport report = sharded->grad_sync_report();
    EXPECT_EQ(report.unit_gathers, (2 * cut + held) * steps + 2 * (cut + held));
    EXPECT_EQ(report.unit_prefetches, prefetched + cut + held - 1);
  });
}

// A forward that is a chain of the children (first, act, second; act holds nothing): a unit each for first and
// second, cut around.
TEST(ShardedModel, AChainedTorchScriptModelHoldsOneChildsUnitsAtATime) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  expect_cut_units(tiny_model(tiny_models::chain_mlp, "chain"), 2, 0, {});
}

// A forward that is no chain but calls each child once (a residual connection around act): accel runs a copy of
// it with its calls around each child's.
TEST(ShardedModel, AResidualTorchScriptModelHoldsOneChildsUnitsAtATime) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  expect_cut_units(tiny_model(tiny_models::residual_mlp, "residual"), 2, 0, {});
}

// The same children inside a submodule (self.block.first): by default each called submodule is a unit, and it
// is cut around their calls too.
TEST(ShardedModel, ANestedTorchScriptModelHoldsOneCalledModulesUnitsAtATime) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  expect_cut_units(tiny_model(tiny_models::nested_mlp, "nested"), 2, 0, {});
}

// A forward that calls a method of the root's own (self.middle(h), which calls act): the method is inlined
// into the cut copy, so first and second are cut around as in the residual model (before, the whole model was
// gathered around the forward).
TEST(ShardedModel, AForwardCallingAMethodOfItsOwnIsCutToo) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  expect_cut_units(tiny_model(tiny_models::helper_method_mlp, "helper"), 2, 0, {});
}

// A weight two cut children hold (mid's and again's): it is held through the forward in a unit of its own (in
// mid's unit it would be freed before again's forward reads it), the children's other parameters cut around.
TEST(ShardedModel, AWeightTiedAcrossCutChildrenIsHeld) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  expect_cut_units(tiny_model(tiny_models::tied_children_mlp, "tied_children"), 4, 1, {"mid.weight"});
}

// What forward uses otherwise (first's weight read outside its forward, extra called twice, the root's own
// scale) is held, a unit per top-level child; second is still cut around (before, the whole model was held).
TEST(ShardedModel, APartlyCutTorchScriptModelHoldsOnlyWhatItUsesOtherwise) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  expect_cut_units(tiny_model(tiny_models::partly_cut_mlp, "partly_cut"), 1, 3,
                   {"first.weight", "first.bias", "extra.weight", "extra.bias", "scale"});
}

// A forward given its input by name is cut as a positional one: no unit held into the backward, stage 0's output.
TEST(ShardedModel, ANamedInputIsCutToo) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  const auto make = tiny_model(tiny_models::residual_mlp, "residual_named");
  auto whole = make("whole");
  auto sharded = make("sharded");
  PrepareConfig stage0, stage3;
  stage3.reducer.zero_stage = 3;
  whole->prepare(state, stage0);
  sharded->prepare(state, stage3);
  at::manual_seed(3);
  const at::Tensor x = at::randn({3, 8});
  const at::Tensor output = sharded->forward({}, {{"x", x}}, true).values.front().second;
  for (const auto& [name, parameter] : sharded->named_parameters()) {
    EXPECT_EQ(parameter.storage().nbytes(), 0u) << name << " held between forward and backward";
  }
  EXPECT_TRUE(output.equal(whole->forward({x}, {}, false).values.front().second));
  auto loop = std::make_shared<TrainingLoop>(state);
  auto optimizer = test_optimizer(loop, *sharded, "sgd");
  loop->backward(output.sum());
  optimizer->step();
}

// With find_unused_parameters, as DDP: a unit no rank reached since the last synchronisation keeps no
// gradient (the optimizer skips it), and one reached by a micro-step before the synchronising backward only is
// reduced. Every rank feeds the same batches, so that DDP's own answer there (each rank keeps the gradient it
// accumulated, unaveraged) is the average too, bit for bit on 2 processes: stage 0's weights, which would not
// be reached if the first micro-step's use were forgotten, or if unused units took zeros (momentum moving them).
TEST(ShardedModel, AUnitNoRankReachedKeepsNoGradientAndOneReachedBeforeTheSyncIsReduced) {
  if (world() != 2) GTEST_SKIP() << "the same batches average to each rank's own on 2 processes";
  auto loop = std::make_shared<TrainingLoop>(state);
  loop->set_gradient_accumulation_steps(2);
  const auto make = tiny_model(tiny_models::gated_extra_mlp, "gated");
  auto whole = make("whole");
  auto sharded = make("sharded");
  PrepareConfig stage0, stage3;
  stage0.reducer.find_unused_parameters = stage3.reducer.find_unused_parameters = true;
  stage3.reducer.zero_stage = 3;
  whole->prepare(state, stage0);
  sharded->prepare(state, stage3);
  auto whole_optimizer = test_optimizer(loop, *whole, "sgd");
  auto sharded_optimizer = test_optimizer(loop, *sharded, "sgd");
  at::manual_seed(11);
  // extra: in both micro-steps of the first window, the first only of the second, none of the third.
  const std::vector<float> uses = {1, 1, 1, 0, 0, 0, 1, 0};
  for (size_t step = 0; step < uses.size(); ++step) {
    loop->accumulate();
    const at::Tensor x = at::randn({4, 8}), y = at::randn({4, 4}), use = at::full({1}, uses[step]);
    for (Model* model : {whole.get(), sharded.get()}) {
      loop->backward(at::mse_loss(model->forward({x, use}, {}, true).values.front().second, y));
    }
    for (auto* optimizer : {&whole_optimizer, &sharded_optimizer}) {
      (*optimizer)->step();
      (*optimizer)->zero_grad();
    }
  }
  std::vector<at::Tensor> values;
  sharded->for_each_gathered_parameter(true, [&](const at::Tensor&, const at::Tensor& value) {
    values.push_back(value.clone());
  });
  const auto expected = whole->trainable_parameters();
  ASSERT_EQ(values.size(), expected.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_TRUE(values[i].equal(expected[i].second)) << expected[i].first;
}

// Run by train.sharded_model_failure.cut (SHARDED_FAILURE=cut): rank 1 leaves before a forward of the residual
// model, whose gathers run inside TorchScript's interpreter; rank 0's failure comes out as accel's own error
// (PeerFailed or Timeout naming the unit's gather), not as the interpreter's rewording of it.
TEST(ShardedModel, AFailureInACutForwardComesOutAsItself) {
  const char* mode = std::getenv("SHARDED_FAILURE");
  if (mode == nullptr || std::string(mode) != "cut" || world() != 2) GTEST_SKIP() << "run by train.sharded_model_failure.cut";
  auto model = Model::load_file(tiny_models::residual_mlp(tiny_models::temp_file("residual_failure.pt")));
  PrepareConfig stage3;
  stage3.reducer.zero_stage = 3;
  model->prepare(state, stage3);
  if (rank() == 1) _exit(0);
  try {
    model->forward({at::randn({3, 8})}, {}, true);
    ADD_FAILURE() << "rank 1's exit went unnoticed";
  } catch (const Error& error) {
    EXPECT_TRUE(error.code() == Code::PeerFailed || error.code() == Code::Timeout) << error.what();
    EXPECT_NE(std::string(error.what()).find("ZeRO-3 parameter all-gather of unit"), std::string::npos) << error.what();
  }
}

// A TorchScript model accel runs itself, whose forward cannot be cut from outside: under stage 3 its units
// (given, or by top-level child: the MLP's parameters are its own, one unit) are gathered whole before each
// forward and freed one by one in backward as their gradients are reduced. It takes stage 0's steps bit for
// bit (SGD and AdamW, accumulation 1 and 3, clipping), holds no parameter memory between steps (nor after an
// evaluation), saves its whole weights and its checkpoint in pieces for a stage 0 model to load, and refuses
// what would read the released parameters.
TEST(ShardedModel, TorchScriptModelTakesStageZerosSteps) {
  auto loop = std::make_shared<TrainingLoop>(state);
  for_kinds_and_accumulations(*loop, [&](const std::string& kind, int64_t accumulation) {
    auto whole = load_mlp("script_whole_" + kind);
    auto sharded = load_mlp("script_sharded_" + kind);
    if (kind == "sgd") sharded->set_units({0, 0, 1, 1});
    PrepareConfig stage0, stage3;
    stage3.reducer.zero_stage = 3;
    // On the CPU the offloaded shares stay where they are: the option's path, not its copies (gpu.sharded). On
    // one process stage 3 is offloaded or nothing.
    stage3.reducer.cpu_offload = kind == "adamw" || world() == 1;
    whole->prepare(state, stage0);
    sharded->prepare(state, stage3);
    ASSERT_EQ(sharded->sharded_units()->unit_count(), kind == "sgd" ? 2u : 1u);
    const auto expected = whole->trainable_parameters();
    expect_stage_zeros_steps(loop, *whole, *sharded, kind, accumulation,
                             load_mlp("script_untouched")->named_parameters()[0].second, [] {});
    // The whole model gathered before each forward (the steps', and an evaluation's), the gathers after
    // the first started with it; and once to compare the weights, each unit's gather started while the one
    // before is read.
    const int64_t forwards = 10 * accumulation + 1;
    const int64_t units = static_cast<int64_t>(sharded->sharded_units()->unit_count());
    EXPECT_EQ(sharded->grad_sync_report().unit_prefetches, (units - 1) * (forwards + 1));
    const auto probe = at::randn({3, 8});
    // save_model writes the whole weights (every rank gathering, rank 0 writing); a fresh stage 0 model
    // loads them to the trained values, and loading them back puts each share in place.
    std::string directory = test_support::temp_directory() + "/sharded_script_" + std::to_string(getpid());
    distributed::broadcast_bytes(*state, directory, 0);
    ckpt::save_model(*state, *sharded, directory, 0);
    auto reloaded = load_mlp("script_reloaded_" + kind);
    ckpt::load_model(*reloaded, directory);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(reloaded->trainable_parameters()[i].second.equal(expected[i].second)) << expected[i].first;
    }
    ckpt::load_model(*sharded, directory);
    EXPECT_TRUE(sharded->forward({probe}, {}, false).values.front().second.equal(
        whole->forward({probe}, {}, false).values.front().second));
    // save_state in pieces (stage 3's default), each rank writing its shares: a stage 0 model resumes from them.
    sharded->set_checkpoint_in_pieces(true);
    ckpt::CheckpointObjects saving, loading;
    saving.models = {sharded.get()};
    ckpt::save_state(state, directory + "/checkpoint", saving);
    EXPECT_TRUE(path_exists(ckpt::model_part_file(directory + "/checkpoint", rank(), 0)));
    auto weights_only = load_mlp("script_weights_only_" + kind);  // load_weights: the checkpoint's first model
    ckpt::load_model(*weights_only, directory + "/checkpoint");
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(weights_only->trainable_parameters()[i].second.equal(expected[i].second)) << expected[i].first;
    }
    auto resumed = load_mlp("script_resumed_" + kind);
    resumed->prepare(state, stage0);
    loading.models = {resumed.get()};
    ckpt::load_state(state, directory + "/checkpoint", loading);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(resumed->trainable_parameters()[i].second.equal(expected[i].second)) << expected[i].first;
    }

    distributed::all_or_none(*state, [&] { if (rank() == 0) remove_all(directory); }, "removing the saved model");
    expect_error(Code::Unsupported, "write them whole with save_model", [&] { sharded->unwrap(); });
    expect_error(Code::InvalidState, "accel gathers and reduces this TorchScript model's units itself",
                 [&] { sharded->gather_unit(0, at::empty({sharded->sharded_units()->unit_numel(0)})); });
    expect_error(Code::Unsupported, "write them whole with save_model", [&] { sharded->save_torchscript("/nonexistent"); });
  });
}

// FSDP's mixed precision (zero_param_dtype, zero_reduce_dtype): a unit gathered in the compute dtype holds
// the parameters cast to it (each share is cast before the all-gather), one gathered in the parameters' own
// dtype their exact values; gradients are handed over in the compute dtype only; a bf16 reduction is refused
// at prepare where Gloo would carry it. (The steps, bit for bit: fsdp_mixed_precision.py.)
TEST(ShardedModel, MixedPrecisionGathersInTheComputeDtype) {
  if (world() == 1) GTEST_SKIP() << "one process shards nothing";
  auto loop = std::make_shared<TrainingLoop>(state);
  const auto reference = load_mlp("sharded_mixed");
  const auto make = [&](at::ScalarType reduce) {
    NamedTensors named;
    for (const auto& [name, tensor] : reference->named_parameters()) named.emplace_back(name, tensor.detach().clone().requires_grad_());
    auto model = Model::from_tensors(named, std::vector<bool>(named.size(), true), {});
    model->set_units({0, 0, 1, 1});
    PrepareConfig prepare;
    prepare.reducer.zero_stage = 3;
    prepare.reducer.unit_param_dtype = at::kBFloat16;
    prepare.reducer.unit_reduce_dtype = reduce;
    model->prepare(state, prepare);
    return model;
  };
  auto model = make(at::kFloat);
  const ShardedUnits& units = *model->sharded_units();
  EXPECT_EQ(units.compute_dtype(1), at::kBFloat16);
  EXPECT_EQ(units.reduce_dtype(1), at::kFloat);
  for (size_t u = 0; u < units.unit_count(); ++u) {
    auto low = at::empty({units.unit_numel(u)}, at::kBFloat16);
    auto exact = at::empty({units.unit_numel(u)});
    model->gather_unit(u, low);
    model->gather_unit(u, exact);
    EXPECT_TRUE(low.equal(exact.to(at::kBFloat16))) << "unit " << u;
    for (size_t i = 0; i < 4; ++i) {
      const auto [unit, offset] = units.place(i);
      const at::Tensor& expected = reference->named_parameters()[i].second;
      if (unit == u) EXPECT_TRUE(exact.narrow(0, offset, expected.numel()).view(expected.sizes()).equal(expected)) << i;
    }
  }
  // A unit prefetched in the compute dtype cannot give the exact values: the prefetch is done, and refused.
  const auto low = at::empty({units.unit_numel(0)}, at::kBFloat16);
  model->prefetch_unit(0, low);
  expect_error(Code::InvalidArgument, "unit 0 was prefetched in another dtype than Float",
               [&] { model->gather_unit(0, at::empty({units.unit_numel(0)})); });
  EXPECT_FALSE(units.prefetched(0));
  auto optimizer = test_optimizer(loop, *model, "sgd");
  loop->accumulate();
  model->begin_forward(true);
  expect_error(Code::Dtype, "is Float, its parameters are Float computed in BFloat16",
               [&] { model->reduce_unit(0, at::zeros({units.unit_numel(0)})); });
  if (state->group("bf16 check")->allreduces_bfloat16()) {
    EXPECT_EQ(make(at::kBFloat16)->sharded_units()->reduce_dtype(0), at::kBFloat16);
  } else {
    expect_error(Code::Unsupported, "zero_reduce_dtype 'bf16': this LibTorch's Gloo cannot sum bfloat16",
                 [&] { make(at::kBFloat16); });
  }
}

// Driven by the ctest entries train.sharded_model_failure.* (skipped otherwise): SHARDED_FAILURE "stall" has
// rank 1 sleep instead of gathering unit 1 ("stall-prefetched": while rank 0's prefetch of it is in flight),
// "exit" has it leave before reducing unit 1. Rank 0 must fail
// within the timeout (ACCEL_TIMEOUT_S) plus a few seconds, naming the unit's collective and rank 1, and its
// shares must be those of before the step: the optimizer step is refused.
TEST(ShardedModel, ALostOrStalledRankFailsTheOthersNamingTheUnit) {
  const char* mode = std::getenv("SHARDED_FAILURE");
  if (mode == nullptr || world() != 2) GTEST_SKIP() << "run by train.sharded_model_failure.*";
  const std::string failure = mode;
  auto loop = std::make_shared<TrainingLoop>(state);
  auto caller = caller_copy_of(*load_mlp("sharded_failure"), 3);
  auto optimizer = test_optimizer(loop, *caller.model, "sgd");
  loop->accumulate();
  caller.model->begin_forward(true);
  const auto before = caller.model->sharded_units()->partition().parameter_chunks;
  std::vector<at::Tensor> shares;
  for (const auto& chunk : before) shares.push_back(chunk.clone());
  auto full = at::empty({caller.model->sharded_units()->unit_numel(1)});
  if (rank() == 1) {
    if (failure != "exit") sleep(static_cast<unsigned>(3 * state->options().get_double("timeout_s")));
    if (failure == "exit") caller.model->gather_unit(1, full);
    _exit(0);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string collective = failure == "exit" ? "ZeRO-3 gradient reduction of unit 1"
                                                   : "ZeRO-3 parameter all-gather of unit 1";
  try {
    if (failure == "stall-prefetched") caller.model->prefetch_unit(1, full);
    caller.model->gather_unit(1, full);
    caller.model->reduce_unit(1, at::zeros_like(full));
    ADD_FAILURE() << "rank 1's " << failure << " went unnoticed";
  } catch (const Error& error) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "rank 0: %s after %.1f s\n", error.what(), elapsed);
    EXPECT_TRUE(error.code() == Code::Timeout || error.code() == Code::PeerFailed) << error.what();
    EXPECT_NE(std::string(error.what()).find(collective), std::string::npos) << error.what();
    EXPECT_LT(elapsed, state->options().get_double("timeout_s") + 5.0);
  }
  expect_error(Code::InvalidState, "", [&] { optimizer->step(); });
  for (size_t u = 0; u < shares.size(); ++u) EXPECT_TRUE(before[u].equal(shares[u])) << "unit " << u << " changed";
}

}  // namespace
