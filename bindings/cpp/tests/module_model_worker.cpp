// accel_torch.hpp's ModuleModel on every rank under `accel launch` (1 and 2 processes): a torch::nn::Module of
// LibTorch's C++ frontend gets rank 0's weights and buffers in place, autograd accumulates its gradients into
// accel's storage (the buckets, with several processes: nothing copied in), the gradient accumulators' hooks
// mark them ready, and after backward each gradient is the average of what every rank's own batch gives.
// A zero_grad that sets the gradients to none is repaired by the hooks; a frozen parameter gets no storage; a
// tied tensor is one parameter; the grad scaler's calls answer.
// The same MLP trained to the weights of the TorchScript path: examples.train_digits_module_cpp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/api/include/torch/utils.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "accel.hpp"
#include "accel_torch.hpp"

namespace {

std::unique_ptr<accel::State> state;

int rank() { return state->process_index(); }
int world() { return state->num_processes(); }

struct NetImpl : torch::nn::Module {
  NetImpl() : hidden(register_module("hidden", torch::nn::Linear(6, 5))), out(register_module("out", torch::nn::Linear(5, 3))) {
    shift = register_buffer("shift", at::zeros({5}));
  }
  at::Tensor forward(const at::Tensor& x) { return out(at::tanh(hidden(x) + shift)); }
  torch::nn::Linear hidden, out;
  at::Tensor shift;
};
TORCH_MODULE(Net);

// A Net whose weights and buffer depend on seed.
Net make_net(int64_t seed) {
  at::manual_seed(seed);
  Net net;
  net->shift.uniform_();
  return net;
}

// What every rank agrees on: the same tensor everywhere (its max and min over the ranks equal it).
void expect_same_on_every_rank(const at::Tensor& tensor, const std::string& name) {
  const auto shared = accel::from_torch(tensor.detach().contiguous());
  const auto largest = accel::to_torch(state->reduce(shared, "max"));
  const auto smallest = accel::to_torch(state->reduce(shared, "min"));
  EXPECT_TRUE(largest.equal(tensor.detach()) && smallest.equal(tensor.detach())) << name << " differs between the ranks";
}

// The gradients of this rank's batch alone on make_net(seed) (every rank's weights after prepare), without
// accel, averaged over the ranks.
std::vector<at::Tensor> averaged_gradients(int64_t seed, const at::Tensor& x, const at::Tensor& y) {
  Net plain = make_net(seed);
  at::mse_loss(plain->forward(x), y).backward();
  std::vector<at::Tensor> out;
  for (const auto& parameter : plain->parameters()) {
    out.push_back(accel::to_torch(state->reduce(accel::from_torch(parameter.grad()), "mean")));
  }
  return out;
}

TEST(ModuleModel, PrepareGivesEveryModuleRankZerosWeightsAndBuffersInPlace) {
  Net net = make_net(100 + rank());
  const auto weight_memory = net->hidden->weight.data_ptr();
  accel::ModuleModel model(*state, *net);
  EXPECT_EQ(net->hidden->weight.data_ptr(), weight_memory) << "the module's tensors were replaced";
  const Net first = make_net(100);
  for (const auto& item : net->named_parameters()) {
    EXPECT_TRUE(item.value().equal(first->named_parameters()[item.key()])) << item.key() << " is not rank 0's";
  }
  EXPECT_TRUE(net->shift.equal(first->shift)) << "the buffer is not rank 0's";
  // Before any backward, so that the first one accumulates there too (a repair by the hooks would copy).
  const auto parameters = net->parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    ASSERT_TRUE(parameters[i].grad().defined()) << "parameter " << i << " has no gradient storage";
    EXPECT_EQ(parameters[i].grad().data_ptr(), accel::to_torch(model.model().grad_view(i)).data_ptr())
        << "parameter " << i << "'s gradient is not accel's storage";
  }
}

TEST(ModuleModel, AutogradAccumulatesIntoAccelsStorageAndEveryGradientIsTheAverage) {
  Net net = make_net(7);
  accel::ModuleModel model(*state, *net);
  at::manual_seed(11 + rank());  // each rank its own batch
  const auto x = at::randn({4, 6}), y = at::randn({4, 3});
  const auto expected = averaged_gradients(7, x, y);

  state->accumulate();
  model.begin_forward();
  model.backward(at::mse_loss(net->forward(x), y));
  const auto parameters = net->parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    EXPECT_EQ(parameters[i].grad().data_ptr(), accel::to_torch(model.model().grad_view(i)).data_ptr())
        << "parameter " << i << "'s gradient is not accel's storage";
    EXPECT_TRUE(parameters[i].grad().allclose(expected[i], 1e-6, 1e-7)) << "parameter " << i << " is not the average";
  }
  if (world() > 1) {
    EXPECT_EQ(model.model().grad_sync_stat("syncs"), 1);
    EXPECT_EQ(model.model().grad_sync_stat("copied_bytes"), 0) << "autograd did not accumulate into the buckets";
  }
}

// Accelerate's backward divides the loss by gradient_accumulation_steps: N micro-batches of the same batch
// accumulate to the gradient of one (run with N = 3 by cpp.module_model_accumulation.np2).
TEST(ModuleModel, BackwardDividesByTheAccumulationSteps) {
  Net net = make_net(9);
  accel::ModuleModel model(*state, *net);
  at::manual_seed(31 + rank());
  const auto x = at::randn({4, 6}), y = at::randn({4, 3});
  const auto expected = averaged_gradients(9, x, y);
  const int64_t steps = state->gradient_accumulation_steps();
  for (int64_t micro = 1; micro <= steps; ++micro) {
    state->accumulate();
    EXPECT_EQ(state->sync_gradients(), micro == steps) << "micro-batch " << micro;
    model.begin_forward();
    model.backward(at::mse_loss(net->forward(x), y));
  }
  const auto parameters = net->parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    EXPECT_TRUE(parameters[i].grad().allclose(expected[i], 1e-5, 1e-6))
        << "parameter " << i << " after " << steps << " micro-batches is not one batch's average gradient";
  }
}

TEST(ModuleModel, AGradientSetToNoneIsCopiedBackIntoTheStorage) {
  Net net = make_net(8);
  accel::ModuleModel model(*state, *net);
  accel::Options sgd;
  sgd.set("lr", "0.5");
  accel::Optimizer optimizer(model.model(), "sgd", &sgd);
  at::manual_seed(21 + rank());
  const auto x = at::randn({4, 6}), y = at::randn({4, 3});
  const auto expected = averaged_gradients(8, x, y);
  const auto before = net->out->bias.detach().clone();

  net->zero_grad(/*set_to_none=*/true);
  ASSERT_FALSE(net->out->bias.grad().defined());
  state->accumulate();
  model.begin_forward();
  model.backward(at::mse_loss(net->forward(x), y));
  EXPECT_EQ(net->out->bias.grad().data_ptr(), accel::to_torch(model.model().grad_view(3)).data_ptr());
  EXPECT_TRUE(net->out->bias.grad().allclose(expected[3], 1e-6, 1e-7));
  optimizer.step();  // reads the storage: the step is the averaged gradient's
  EXPECT_TRUE(net->out->bias.detach().allclose(before - 0.5 * expected[3], 1e-6, 1e-7));
}

TEST(ModuleModel, AFrozenParameterHasNoStorageAndIsLeftAlone) {
  Net net = make_net(9);
  net->hidden->bias.set_requires_grad(false);
  accel::ModuleModel model(*state, *net);
  EXPECT_FALSE(net->hidden->bias.grad().defined());
  try {
    model.model().grad_view(1);
    ADD_FAILURE() << "a frozen parameter has gradient storage";
  } catch (const accel::Error& error) {
    EXPECT_EQ(error.code(), ACCEL_ERR_INVALID_ARGUMENT) << error.what();
  }
  state->accumulate();
  model.begin_forward();
  model.backward(net->forward(at::ones({2, 6})).sum());
  EXPECT_TRUE(net->out->weight.grad().defined());
}

// A tensor the module registers under two names is one parameter, under its first name, as in
// named_parameters' dedup of torch's Python modules; its gradient sums both uses.
TEST(ModuleModel, ATiedTensorIsOneParameter) {
  torch::nn::Module tied;
  at::manual_seed(12);
  const auto shared = tied.register_parameter("first", at::randn({3}));
  tied.register_parameter("second", shared);
  accel::ModuleModel model(*state, tied);
  ASSERT_EQ(model.model().num_parameters(), 1u);
  EXPECT_STREQ(accel_model_parameter_name(model.model().get(), 0), "first");
  state->accumulate();
  model.begin_forward();
  model.backward((shared * 2).sum() + shared.sum());
  EXPECT_TRUE(shared.grad().equal(at::full({3}, 3.0f)));
  EXPECT_EQ(shared.grad().data_ptr(), accel::to_torch(model.model().grad_view(0)).data_ptr());
}

// State's grad scaler calls, for an optimizer that is not accel's: without fp16 loss scaling (the CPU's case)
// the scale is 1 and unscaling divides nothing and finds nothing.
TEST(ModuleModel, TheGradScalerCallsAnswerWithoutFp16) {
  Net net = make_net(10);
  accel::ModuleModel model(*state, *net);
  EXPECT_EQ(state->mixed_precision(), "no");
  EXPECT_EQ(accel::to_torch(state->grad_scale()).item<float>(), 1.0f);
  net->out->bias.grad().fill_(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(state->unscale_gradients(model.model())) << "found inf without loss scaling";
  EXPECT_TRUE(net->out->bias.grad().isinf().all().item<bool>()) << "a gradient changed without loss scaling";
  state->update_grad_scale(/*found_inf=*/true);
  EXPECT_EQ(accel::to_torch(state->grad_scale()).item<float>(), 1.0f);
}

// The bytes of parameter memory a module holds.
size_t held(const torch::nn::Module& module) {
  size_t bytes = 0;
  for (const auto& parameter : module.parameters()) bytes += parameter.storage().nbytes();
  return bytes;
}

// make_net(seed) prepared under stage 0 (whole) and under stage 3 (sharded), each with accel's AdamW (lr 0.05,
// weight decay 0.01).
struct StagesZeroAndThree {
  explicit StagesZeroAndThree(int64_t seed)
      : whole(make_net(seed)), sharded(make_net(seed)), whole_model(*state, *whole),
        sharded_model(*state, *sharded, &stage3), whole_optimizer(whole_model.model(), "adamw", &adamw),
        sharded_optimizer(sharded_model.model(), "adamw", &adamw) {}

  // Both optimizers step, then zero the gradients; under stage 3 with several processes the module then holds
  // no parameter memory.
  void step(int64_t micro) {
    for (auto* optimizer : {&whole_optimizer, &sharded_optimizer}) {
      optimizer->step();
      optimizer->zero_grad();
    }
    if (world() > 1) EXPECT_EQ(held(*sharded), 0u) << "micro-step " << micro << ": parameters held between steps";
  }

  static accel::Options options(const std::vector<std::pair<std::string, std::string>>& settings) {
    accel::Options made;
    for (const auto& [key, value] : settings) made.set(key, value);
    return made;
  }

  accel::Options stage3 = options({{"zero_stage", "3"}});
  accel::Options adamw = options({{"lr", "0.05"}, {"weight_decay", "0.01"}});
  Net whole, sharded;
  accel::ModuleModel whole_model, sharded_model;
  accel::Optimizer whole_optimizer, sharded_optimizer;
};

// zero_stage 3: the module's parameters hold no memory between steps (libaccel holds this process's share),
// its units are gathered by begin_forward (their gathers started together), and accel's AdamW over the shares takes stage 0's steps bit for bit
// (with accumulation under cpp.module_model_accumulation.np2); an evaluation forward's gathered parameters
// go with release_parameters; whole_tensors gathers them for process 0. One process shards nothing.
TEST(ModuleModel, ZeroStageThreeTakesStageZerosStepsHoldingOnlyItsShare) {
  StagesZeroAndThree stages(40);
  Net &whole = stages.whole, &sharded = stages.sharded;
  accel::ModuleModel& sharded_model = stages.sharded_model;
  EXPECT_EQ(sharded_model.model().num_units(), world() > 1 ? 2u : 0u) << "one unit per child: hidden and out";
  const int64_t steps = 6 * state->gradient_accumulation_steps();
  for (int64_t micro = 0; micro < steps; ++micro) {
    at::manual_seed(50 + micro * 10 + rank());
    const auto x = at::randn({4, 6}), y = at::randn({4, 3});
    state->accumulate();
    for (auto* side : {&stages.whole_model, &sharded_model}) {
      side->begin_forward();
      Net& net = side == &stages.whole_model ? whole : sharded;
      side->backward(at::mse_loss(net->forward(x), y));
    }
    stages.step(micro);
  }
  {
    torch::NoGradGuard no_grad;
    sharded_model.begin_forward(/*grad_enabled=*/false);
    const auto expected = whole->named_parameters();
    for (const auto& item : sharded->named_parameters()) {
      EXPECT_TRUE(item.value().equal(expected[item.key()])) << item.key() << " differs from stage 0's";
    }
    EXPECT_FALSE(sharded->forward(at::ones({1, 6})).isnan().any().item<bool>());
    sharded_model.release_parameters();
  }
  if (world() > 1) {
    EXPECT_EQ(held(*sharded), 0u) << "release_parameters kept memory";
    // Each begin_forward started the second unit's gather before waiting for the first's.
    EXPECT_EQ(sharded_model.model().grad_sync_stat("unit_prefetches"), static_cast<double>(steps + 1));
  }
  // whole_tensors gathers the parameters (and hands the buffers) for the processes that keep them, by name.
  const auto gathered = sharded_model.model().whole_tensors(rank() == 0);
  const auto parameters = whole->named_parameters();
  const auto buffers = whole->named_buffers();
  EXPECT_EQ(gathered.size(), rank() == 0 ? parameters.size() + buffers.size() : 0u);
  for (const auto& [name, tensor] : gathered) {
    const at::Tensor* expected = parameters.find(name) != nullptr ? parameters.find(name) : buffers.find(name);
    ASSERT_NE(expected, nullptr) << name;
    EXPECT_TRUE(accel::to_torch(tensor).equal(*expected)) << name;
  }
  EXPECT_FALSE(whole->hidden->weight.equal(make_net(40)->hidden->weight)) << "nothing trained";
  // set_parameter: a whole value (a state dict's) into this process's share; whole_tensors gathers it back.
  const at::Tensor halved = whole->hidden->weight.detach() * 0.5;
  sharded_model.model().set_parameter(0, accel::from_torch(halved));
  size_t found = 0;
  for (const auto& [name, tensor] : sharded_model.model().whole_tensors(rank() == 0)) {
    if (name != "hidden.weight") continue;
    found += 1;
    EXPECT_TRUE(accel::to_torch(tensor).equal(halved)) << "set_parameter";
  }
  EXPECT_EQ(found, rank() == 0 ? 1u : 0u);
}

// zero_stage 3 a child at a time: with begin_forward(true, /*by_child=*/true) and each child's forward run
// through forward_child, a child's units are released after its forward (out's forward finds hidden's
// released), the next child's gather is started ahead in forward and backward (counted),
// and accel's AdamW takes stage 0's steps bit for bit (with accumulation under cpp.module_model_accumulation.np2).
// A module that is not a top-level child is refused.
TEST(ModuleModel, ZeroStageThreeByChildGathersOneChildAtATime) {
  StagesZeroAndThree stages(41);
  Net &whole = stages.whole, &sharded = stages.sharded;
  accel::ModuleModel &whole_model = stages.whole_model, &sharded_model = stages.sharded_model;
  const int64_t steps = 6 * state->gradient_accumulation_steps();
  for (int64_t micro = 0; micro < steps; ++micro) {
    at::manual_seed(70 + micro * 10 + rank());
    const auto x = at::randn({4, 6}), y = at::randn({4, 3});
    state->accumulate();
    whole_model.begin_forward();
    whole_model.backward(at::mse_loss(whole->forward(x), y));
    sharded_model.begin_forward(true, /*by_child=*/true);
    const auto hidden = sharded_model.forward_child(*sharded->hidden, [&] {
      // out's memory then is its prefetch, but in the first forward (nothing to guess by).
      if (world() > 1 && micro == 0) EXPECT_EQ(held(*sharded->out), 0u) << "out gathered during hidden's forward";
      return sharded->hidden(x);
    });
    const auto output = sharded_model.forward_child(*sharded->out, [&] {
      if (world() > 1) EXPECT_EQ(held(*sharded->hidden), 0u) << "hidden still gathered during out's forward";
      return sharded->out(at::tanh(hidden + sharded->shift));
    });
    sharded_model.backward(at::mse_loss(output, y));
    stages.step(micro);
  }
  if (world() > 1) {
    // Per step, out's gather started during hidden's forward (but in the first) and hidden's during out's
    // backward.
    EXPECT_EQ(sharded_model.model().grad_sync_stat("unit_prefetches"), static_cast<double>(2 * steps - 1));
  }
  const auto gathered = sharded_model.model().whole_tensors(rank() == 0);
  const auto expected = whole->named_parameters();
  for (const auto& [name, tensor] : gathered) {
    if (expected.find(name) != nullptr) EXPECT_TRUE(accel::to_torch(tensor).equal(expected[name])) << name;
  }
  EXPECT_FALSE(whole->hidden->weight.equal(make_net(41)->hidden->weight)) << "nothing trained";
  if (world() > 1) {
    sharded_model.begin_forward(true, /*by_child=*/true);
    EXPECT_THROW(sharded_model.forward_child(*whole->hidden, [] { return at::Tensor(); }), accel::Error);
    sharded_model.end_backward();
  }
}

// AddressSanitizer keeps freed memory in quarantine, resident: what a free gives back cannot be measured.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool frees_are_resident = true;
#elif defined(__has_feature)
constexpr bool frees_are_resident = __has_feature(address_sanitizer);
#else
constexpr bool frees_are_resident = false;
#endif

// What /proc/self/status says of this process's resident memory ("VmRSS", or its peak "VmHWM"), in bytes.
int64_t resident_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  ADD_FAILURE() << key << " not in /proc/self/status";
  return 0;
}

// Prepare under zero_stage 3 takes the module's memory a unit at a time: its parameters lend theirs to the
// library for prepare, so each unit's goes once this process has its share of it, and what prepare adds to
// the process's peak resident memory stays within three units (a 128 MiB module of 16 units on 2 processes;
// keeping the module until prepare ended added the share too, 64 MiB). On one process nothing is sharded, and
// the parameters hold their values again, in the library's memory; so do they after a prepare that failed.
TEST(ModuleModel, ZeroStageThreePrepareLetsTheModulesMemoryGoAUnitAtATime) {
  constexpr int64_t layers = 16, width = 1448;
  at::manual_seed(60);
  torch::nn::Sequential deep;
  for (int64_t layer = 0; layer < layers; ++layer) {
    deep->push_back(torch::nn::Linear(torch::nn::LinearOptions(width, width).bias(false)));
  }
  const at::Tensor first = deep->parameters()[0].detach().clone();
  const accel::Options refused = StagesZeroAndThree::options({{"zero_stage", "4"}});
  EXPECT_THROW(accel::ModuleModel(*state, *deep, &refused), accel::Error);
  EXPECT_TRUE(deep->parameters()[0].equal(first)) << "a failed prepare kept the parameters' memory";
  const accel::Options stage3 = StagesZeroAndThree::options({{"zero_stage", "3"}});
  std::ofstream("/proc/self/clear_refs") << "5";  // the peak (VmHWM) set back to what is resident now
  const int64_t before = resident_bytes("VmRSS");
  accel::ModuleModel model(*state, *deep, &stage3);
  const int64_t added = resident_bytes("VmHWM") - before;
  const int64_t unit_bytes = width * width * 4;
  std::printf("process %d: prepare added %.1f MiB at its peak (three units: %.1f MiB)\n", rank(), added / 1048576.0,
              3 * unit_bytes / 1048576.0);
  if (world() > 1) {
    if (!frees_are_resident) {
      EXPECT_LE(added, 3 * unit_bytes) << "prepare added " << added / 1048576.0 << " MiB at its peak";
    }
    const auto gathered = model.model().whole_tensors(rank() == 0);
    if (rank() == 0) EXPECT_TRUE(accel::to_torch(gathered.at(0).second).equal(first)) << "not the module's values";
  } else {
    EXPECT_EQ(model.model().num_units(), 0u);
    const at::Tensor parameter = deep->parameters()[0];
    EXPECT_TRUE(parameter.equal(first)) << "the parameter's values were not given back";
    EXPECT_EQ(parameter.data_ptr(), accel::to_torch(model.model().parameter(0)).data_ptr());
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  state = std::make_unique<accel::State>();
  const int failed = RUN_ALL_TESTS();
  state->shutdown();
  state.reset();
  return failed;
}
