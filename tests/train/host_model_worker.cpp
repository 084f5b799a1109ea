// A model whose tensors are the caller's (Model::from_tensors), on every rank under `accel launch`: the
// caller here is LibTorch's own autograd on tensors the test owns, standing in for an eager PyTorch module.
// It must train to the very weights of the same MLP as a TorchScript model that accel runs, with every
// gradient accumulated straight into accel's storage (the buckets, with several processes), and keep
// DDP's rules for no_sync and unused parameters. Registered with 1, 2 and 3 processes, and 2 over Gloo.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core_worker.hpp"
#include "expect_error.hpp"
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

// The caller's side: its own tensors (with autograd), and the model accel made of them.
struct CallerModel {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;  // the caller's, requires_grad
  std::shared_ptr<Model> model;

  // The forward of tiny_models' MLP, written by hand as an eager runtime would run it.
  at::Tensor forward(const at::Tensor& x) const {
    return at::matmul(at::relu(at::matmul(x, tensors[0]) + tensors[1]), tensors[2]) + tensors[3];
  }

  // One backward as the caller's runtime runs it, telling the model: gradients marked in the order
  // autograd makes them (last layer first), then the end.
  void backward(const at::Tensor& loss) {
    loss.backward();
    for (size_t i = tensors.size(); i-- > 0;) model->grad_ready(i);
    model->end_backward();
  }
};

// The weights of `reference` (a TorchScript MLP), copied into tensors the caller owns, made into a model and
// prepared; each caller tensor's grad is then accel's storage, as a tensor of its own over that memory (as a
// DLPack import would be), so that the caller's backward accumulates in place.
CallerModel caller_copy_of(const Model& reference, const PrepareConfig& prepare = {}) {
  CallerModel caller;
  NamedTensors named;
  for (const auto& [name, tensor] : reference.named_parameters()) {
    caller.names.push_back(name);
    caller.tensors.push_back(tensor.detach().clone().requires_grad_());
    named.emplace_back(name, caller.tensors.back());
  }
  caller.model = Model::from_tensors(named, std::vector<bool>(named.size(), true), {});
  caller.model->prepare(state, prepare);
  for (size_t i = 0; i < caller.tensors.size(); ++i) caller.tensors[i].mutable_grad() = caller.model->grad_view(i).detach();
  return caller;
}

void expect_same_weights(const Model& script, const CallerModel& caller) {
  const auto& parameters = script.named_parameters();
  ASSERT_EQ(parameters.size(), caller.tensors.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    EXPECT_TRUE(parameters[i].second.detach().equal(caller.tensors[i].detach())) << parameters[i].first;
  }
}

// 20 steps of the same MLP, same data: accel running a TorchScript model, and the caller running its own
// tensors with accel's gradient sync and optimizer. Bit for bit the same weights, for SGD (momentum) and AdamW.
TEST(HostModel, TrainsToTheWeightsOfTheSameTorchScriptModel) {
  auto loop = std::make_shared<TrainingLoop>(state);
  for (const std::string kind : {"sgd", "adamw"}) {
    SCOPED_TRACE(kind);
    auto script = load_mlp("host_script_" + kind);
    script->prepare(state, PrepareConfig{});
    auto caller = caller_copy_of(*script);
    auto script_optimizer = test_optimizer(loop, *script, kind);
    auto caller_optimizer = test_optimizer(loop, *caller.model, kind);
    at::manual_seed(7);
    const auto inputs = at::randn({20, 4 * world(), 8});
    const auto targets = at::randn({20, 4 * world(), 4});
    for (int64_t step = 0; step < 20; ++step) {
      loop->accumulate();
      const auto x = my_rows(inputs[step]), y = my_rows(targets[step]);
      loop->backward(at::mse_loss(script->forward({x}, {}, true).values.front().second, y));
      script_optimizer->step();
      script_optimizer->zero_grad();

      caller.model->begin_forward(true);
      caller.backward(at::mse_loss(caller.forward(x), y));
      for (size_t i = 0; i < caller.tensors.size(); ++i) {
        EXPECT_EQ(caller.tensors[i].grad().data_ptr(), caller.model->grad_view(i).data_ptr())
            << "the caller's backward accumulated outside accel's storage";
      }
      caller_optimizer->step();
      caller_optimizer->zero_grad();  // keeps the storage, zeroed
    }
    expect_same_weights(*script, caller);
    EXPECT_EQ(caller.model->grad_view(0).abs().sum().item<double>(), 0.0);
  }
}

// The caller's own optimizer (prepare_external_optimizer: Python's path for a torch optimizer) under ZeRO
// stage 2: LibTorch's SGD over 1-d views of the elements this rank owns, stepped from the callback with the
// caller's gradients, takes the steps accel's SGD takes at stage 0, bit for bit, clipping on; the elements
// of other ranks come from their owners. Each rank keeps momentum for its own elements only.
TEST(HostModel, TheCallersOptimizerStepsItsShareUnderZero) {
  auto loop = std::make_shared<TrainingLoop>(state);
  const auto reference = load_mlp("host_external");
  auto whole = caller_copy_of(*reference);
  PrepareConfig zero;
  zero.reducer.zero_stage = 2;
  zero.reducer.first_bucket_bytes = 4;  // a bucket per parameter: pieces start inside parameters
  zero.reducer.bucket_bytes = 4;
  auto split = caller_copy_of(*reference, zero);
  auto accel_sgd = test_optimizer(loop, *whole.model, "sgd");

  struct Share {
    at::Tensor view;
    size_t tensor;
    OwnedElements elements;
  };
  std::vector<Share> shares;
  std::unique_ptr<torch::optim::SGD> own;
  auto external = prepare_external_optimizer(loop, *split.model, [&] {
    for (auto& share : shares) {
      share.view.mutable_grad() =
          split.tensors[share.tensor].grad().view({-1}).narrow(0, share.elements.begin, share.elements.numel);
    }
    own->step();
  });
  std::vector<at::Tensor> views;
  int64_t owned = 0;
  for (const auto& elements : external->optimizer().owned_elements()) {
    const size_t tensor = std::find(split.names.begin(), split.names.end(), elements.name) - split.names.begin();
    ASSERT_LT(tensor, split.names.size()) << elements.name;
    views.push_back(split.tensors[tensor].detach().view({-1}).narrow(0, elements.begin, elements.numel));
    shares.push_back({views.back(), tensor, elements});
    owned += elements.numel;
  }
  own = std::make_unique<torch::optim::SGD>(views, torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(0.01));
  int64_t every = 0;
  for (const auto& tensor : split.tensors) every += tensor.numel();
  if (world() == 1) EXPECT_EQ(owned, every);
  if (world() > 1) EXPECT_LT(owned, every);

  at::manual_seed(11);
  const auto inputs = at::randn({20, 4 * world(), 8});
  const auto targets = at::randn({20, 4 * world(), 4});
  for (int64_t step = 0; step < 20; ++step) {
    loop->accumulate();
    const auto x = my_rows(inputs[step]), y = my_rows(targets[step]);
    for (auto* caller : {&whole, &split}) {
      caller->model->begin_forward(true);
      caller->backward(at::mse_loss(caller->forward(x), y));
      loop->clip_grad_norm(*caller->model, 0.05, 2.0);
    }
    accel_sgd->step();
    accel_sgd->zero_grad();
    external->step();
    external->zero_grad();
  }
  for (size_t i = 0; i < whole.tensors.size(); ++i) {
    EXPECT_TRUE(whole.tensors[i].detach().equal(split.tensors[i].detach())) << whole.names[i];
  }
  EXPECT_FALSE(whole.tensors[0].detach().equal(reference->named_parameters()[0].second)) << "nothing trained";
  expect_error(Code::Unsupported, "the caller's own", [&] { (void)external->optimizer().save_state(); });
}

// An optimizer stepped by the caller's own steps the caller's tensors: a TorchScript model is refused.
TEST(HostModel, TheCallersOptimizerNeedsAModelOfTheCallersTensors) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto script = load_mlp("host_external_script");
  script->prepare(state, PrepareConfig{});
  expect_error(Code::InvalidArgument, "model of the caller's tensors",
               [&] { (void)prepare_external_optimizer(loop, *script, [] {}); });
}

// With several processes the storage is the gradient bucket itself: nothing is copied in or out.
TEST(HostModel, GradientStorageIsTheBucket) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto caller = caller_copy_of(*load_mlp("host_bucket"));
  loop->accumulate();
  caller.model->begin_forward(true);
  caller.backward(at::randn({4, 4}).mul(caller.forward(at::randn({4, 8}))).sum());
  const auto report = caller.model->grad_sync_report();
  if (world() == 1) {
    EXPECT_EQ(report.total.syncs, 0);
    return;
  }
  EXPECT_EQ(report.total.syncs, 1);
  EXPECT_EQ(report.total.copied_bytes, 0);
  EXPECT_GT(report.total.bytes, 0);
}

// Inside no_sync the gradients only add up on each rank; the next synchronising backward averages the sum.
TEST(HostModel, NoSyncAccumulatesLocallyUntilTheNextSynchronisingBackward) {
  auto loop = std::make_shared<TrainingLoop>(state);
  auto script = load_mlp("host_no_sync");
  auto caller = caller_copy_of(*script);
  at::manual_seed(11 + rank());  // each rank its own batches
  const auto x1 = at::randn({4, 8}), x2 = at::randn({4, 8});
  loop->no_sync_begin(*caller.model);
  loop->accumulate();
  caller.model->begin_forward(true);
  caller.backward(caller.forward(x1).sum());
  const auto local = caller.model->grad_view(0).clone();
  loop->no_sync_end(*caller.model);
  loop->accumulate();
  caller.model->begin_forward(true);
  caller.backward(caller.forward(x2).sum());
  // The expected average: every rank's own two-batch sum, averaged by hand.
  auto expected = local + [&] {
    auto again = caller_copy_of(*script);
    again.forward(x2).sum().backward();
    return again.tensors[0].grad().clone();
  }();
  auto average = expected.clone();
  if (world() > 1) {
    auto* group = state->group("test");
    average.div_(static_cast<double>(world()));
    group->transport().allreduce(average, accel::distributed::ReduceKind::Sum, "test");
  }
  EXPECT_TRUE(caller.model->grad_view(0).allclose(average, 1e-6, 1e-6));
  if (world() > 1) EXPECT_FALSE(caller.model->grad_view(0).allclose(local, 1e-6, 1e-6)) << "no average was taken";
}

// A parameter the caller's backward never reached (never marked) is named, unless find_unused_parameters;
// with it, one no rank used keeps its gradient as it was (its storage: zeros here).
TEST(HostModel, AnUnmarkedParameterIsNamedUnlessFindUnusedParameters) {
  auto loop = std::make_shared<TrainingLoop>(state);
  if (world() == 1) GTEST_SKIP() << "one process has no gradient sync";
  for (const bool find_unused : {false, true}) {
    SCOPED_TRACE(find_unused ? "find_unused_parameters" : "default");
    PrepareConfig prepare;
    prepare.reducer.find_unused_parameters = find_unused;
    auto caller = caller_copy_of(*load_mlp(find_unused ? "host_unused_found" : "host_unused"), prepare);
    loop->accumulate();
    caller.model->begin_forward(true);
    // A forward that skips the first layer, as a mixture of experts skips an expert: w1 gets no gradient.
    const auto out = at::matmul(at::relu(at::randn({4, 16}) + caller.tensors[1]), caller.tensors[2]) + caller.tensors[3];
    out.sum().backward();
    for (size_t i = caller.tensors.size(); i-- > 1;) caller.model->grad_ready(i);
    if (!find_unused) {
      expect_error(Code::InvalidArgument, "w1", [&] { caller.model->end_backward(); });
      continue;
    }
    caller.model->end_backward();
    EXPECT_EQ(caller.model->grad_view(0).abs().sum().item<double>(), 0.0);
    EXPECT_GT(caller.model->grad_view(1).abs().sum().item<double>(), 0.0);
  }
}

TEST(HostModel, ItsForwardAndBackwardAreTheCallers) {
  auto caller = caller_copy_of(*load_mlp("host_errors"));
  expect_error(Code::Unsupported, "caller's runtime", [&] { caller.model->forward({at::randn({2, 8})}, {}, true); });
  expect_error(Code::OutOfRange, "out of range", [&] { caller.model->grad_ready(9); });
  auto script = load_mlp("host_errors_script");
  script->prepare(state, PrepareConfig{});
  expect_error(Code::InvalidState, "TorchScript", [&] { script->grad_view(0); });
  expect_error(Code::InvalidState, "TorchScript", [&] { script->end_backward(); });
  NamedTensors named{{"w", at::ones({2})}, {"w", at::ones({2})}};
  expect_error(Code::InvalidArgument, "given twice", [&] { Model::from_tensors(named, {true, true}, {}); });
  NamedTensors integer{{"steps", at::ones({2}, at::kLong)}};
  expect_error(Code::InvalidArgument, "not floating", [&] { Model::from_tensors(integer, {true}, {}); });
  EXPECT_NO_THROW(Model::from_tensors(integer, {false}, {}));
  NamedTensors not_utf8{{"w\xff", at::ones({2})}};
  expect_error(Code::InvalidArgument, "'w\\xff' is not UTF-8", [&] { Model::from_tensors(not_utf8, {true}, {}); });
}

// The caller tells the model about its forward and backward only once prepared (model.h): before, and on
// a TorchScript model (whose forward and backward accel runs) prepared or not, the calls are refused.
TEST(HostModel, ForwardAndBackwardNoticesNeedAPreparedModelOfTheCallersTensors) {
  NamedTensors named{{"w", at::ones({2})}};
  auto unprepared = Model::from_tensors(named, {true}, {});
  expect_error(Code::InvalidState, "prepare the model", [&] { unprepared->begin_forward(true); });
  expect_error(Code::InvalidState, "prepare the model", [&] { unprepared->end_backward(); });
  auto script = load_mlp("host_notices_script");
  expect_error(Code::InvalidState, "TorchScript", [&] { script->begin_forward(true); });
  script->prepare(state, PrepareConfig{});
  expect_error(Code::InvalidState, "TorchScript", [&] { script->begin_forward(true); });
}

// One tensor under two names (or the same memory through two tensors, as two DLPack imports of one
// array) is one parameter held twice, as model.h says of tied weights: one SGD step moves it once.
// Memory shared in part is refused, naming both.
TEST(HostModel, ATensorGivenTwiceIsOneParameter) {
  auto loop = std::make_shared<TrainingLoop>(state);
  const auto weight = at::full({1}, 0.008f);
  NamedTensors named{{"encoder.weight", weight}, {"decoder.weight", weight}, {"head.weight", weight.detach()}};
  auto model = Model::from_tensors(named, {true, true, true}, {});
  ASSERT_EQ(model->named_parameters().size(), 1u);
  EXPECT_EQ(model->named_parameters()[0].first, "encoder.weight");
  EXPECT_EQ(model->parameters_and_buffers().size(), 3u);
  model->prepare(state, PrepareConfig{});
  OptimizerConfig config;
  config.lr = 0.5;
  auto optimizer = prepare_optimizer(loop, *model, "sgd", config);
  loop->accumulate();
  model->begin_forward(true);
  model->grad_view(0).fill_(1.0);
  model->grad_ready(0);
  model->end_backward();
  optimizer->step();
  EXPECT_FLOAT_EQ(weight.item<float>(), 0.008f - 0.5f);

  const auto shared = at::zeros({4});
  NamedTensors overlapping{{"a", shared.narrow(0, 0, 3)}, {"b", shared.narrow(0, 1, 3)}};
  expect_error(Code::InvalidArgument, "'a' and 'b' share part of their memory",
               [&] { Model::from_tensors(overlapping, {true, true}, {}); });
  NamedTensors mixed{{"a", weight}, {"b", weight}};
  expect_error(Code::InvalidArgument, "only one of them is trainable", [&] { Model::from_tensors(mixed, {true, false}, {}); });
  NamedTensors buffer_too{{"a", weight}};
  NamedTensors buffers{{"running_mean", weight}};
  expect_error(Code::InvalidArgument, "buffer 'running_mean' is the memory of parameter 'a'",
               [&] { Model::from_tensors(buffer_too, {true}, buffers); });
}

// Prepare compares the processes' models before sending rank 0's values: a parameter named otherwise on
// one process fails every process, naming it, where the counts, shapes and dtypes alone agreed.
TEST(HostModel, PrepareNamesAParameterThatDiffersAcrossProcesses) {
  if (world() == 1) GTEST_SKIP() << "needs several processes";
  NamedTensors named{{"w", at::ones({2})}, {rank() == 1 ? "bias" : "b", at::ones({3})}};
  auto model = Model::from_tensors(named, {true, true}, {});
  expect_error(Code::ShapeMismatch, "tensor 1 (parameters, then buffers) is parameter 'b' [3] Float on process 0, "
                                    "parameter 'bias' [3] Float on process 1",
               [&] { model->prepare(state, PrepareConfig{}); });
  EXPECT_FALSE(model->prepared());
  EXPECT_FALSE(state->broken());
}

}  // namespace
