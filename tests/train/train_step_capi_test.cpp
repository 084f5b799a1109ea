// accel_train_step_* through the C ABI on the CPU: an eager step gives exactly what the loop of separate
// calls gives (clipping, accumulation, a dict output, a loss computed in forward), cuda_graph on a CPU state
// runs eagerly and says why, and bad settings or batches are refused before anything changes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "accel.h"
#include "tiny_models.hpp"

namespace {

std::string last_error() { return accel_error_last(); }

accel_tensor_t* floats(const std::vector<float>& values, std::vector<int64_t> shape) {
  accel_tensor_t* tensor = nullptr;
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, values.data(), ACCEL_DTYPE_FLOAT32, shape.data(), shape.size()), ACCEL_OK);
  return tensor;
}

accel_tensor_t* classes(const std::vector<int64_t>& values) {
  accel_tensor_t* tensor = nullptr;
  const int64_t shape[] = {static_cast<int64_t>(values.size())};
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, values.data(), ACCEL_DTYPE_INT64, shape, 1), ACCEL_OK);
  return tensor;
}

// Batch b: 6 rows of 8 features and their classes 0..3, different for every b.
std::vector<float> features(int b) {
  std::vector<float> values;
  for (int i = 0; i < 48; ++i) values.push_back(std::sin(0.7f * static_cast<float>(i) + 1.3f * static_cast<float>(b)));
  return values;
}
std::vector<int64_t> labels(int b) { return {b % 4, (b + 1) % 4, (b + 3) % 4, 0, 1, (2 * b) % 4}; }

std::vector<float> parameters_of(accel_model_t* model) {
  std::vector<float> all;
  for (size_t i = 0; i < accel_model_num_parameters(model); ++i) {
    accel_tensor_t* parameter = nullptr;
    EXPECT_EQ(accel_model_parameter(model, i, &parameter), ACCEL_OK);
    std::vector<float> values(static_cast<size_t>(accel_tensor_numel(parameter)));
    EXPECT_EQ(accel_tensor_copy_to_buffer(parameter, values.data(), values.size() * sizeof(float)), ACCEL_OK);
    all.insert(all.end(), values.begin(), values.end());
    accel_tensor_free(parameter);
  }
  return all;
}

float scalar_of(const accel_tensor_t* tensor) {
  float value = 0;
  EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, &value, sizeof value), ACCEL_OK) << last_error();
  return value;
}

// A state (with these state options), a model from `path` prepared on it, and an optimizer.
struct Trainer {
  accel_state_t* state = nullptr;
  accel_model_t* model = nullptr;
  accel_optimizer_t* optimizer = nullptr;

  Trainer(const std::string& path, const char* kind, int accumulation = 1) {
    accel_options_t* options = nullptr;
    EXPECT_EQ(accel_options_new(&options), ACCEL_OK);
    EXPECT_EQ(accel_options_set_int(options, "gradient_accumulation_steps", accumulation), ACCEL_OK);
    EXPECT_EQ(accel_state_new(&state, options), ACCEL_OK) << last_error();
    accel_options_free(options);
    EXPECT_EQ(accel_model_load(&model, path.c_str()), ACCEL_OK) << last_error();
    EXPECT_EQ(accel_state_prepare_model(state, model, nullptr), ACCEL_OK) << last_error();
    accel_options_t* settings = nullptr;
    EXPECT_EQ(accel_options_new(&settings), ACCEL_OK);
    EXPECT_EQ(accel_options_set_double(settings, "lr", 0.05), ACCEL_OK);
    if (std::string(kind) == "sgd") EXPECT_EQ(accel_options_set_double(settings, "momentum", 0.9), ACCEL_OK);
    EXPECT_EQ(accel_optimizer_new(&optimizer, model, kind, settings), ACCEL_OK) << last_error();
    accel_options_free(settings);
  }
  ~Trainer() {
    accel_optimizer_free(optimizer);
    accel_model_free(model);
    accel_state_free(state);
  }

  // The loop of separate calls, as an Accelerate user writes it; returns the loss.
  float manual_step(int b, double max_grad_norm) {
    accel_tensor_t* x = floats(features(b), {6, 8});
    accel_tensor_t* y = classes(labels(b));
    EXPECT_EQ(accel_state_accumulate(state), ACCEL_OK);
    accel_output_t* output = nullptr;
    EXPECT_EQ(accel_model_forward(model, &x, 1, nullptr, nullptr, 0, &output), ACCEL_OK) << last_error();
    accel_tensor_t* logits = nullptr;
    EXPECT_EQ(accel_output_get(output, 0, &logits), ACCEL_OK);
    accel_tensor_t* loss = nullptr;
    EXPECT_EQ(accel_loss_compute(&loss, "cross_entropy", logits, y, nullptr), ACCEL_OK) << last_error();
    EXPECT_EQ(accel_state_backward(state, loss), ACCEL_OK) << last_error();
    if (max_grad_norm > 0 && accel_state_sync_gradients(state)) {
      EXPECT_EQ(accel_state_clip_grad_norm(state, model, max_grad_norm, 2.0, nullptr), ACCEL_OK) << last_error();
    }
    EXPECT_EQ(accel_optimizer_step(optimizer), ACCEL_OK) << last_error();
    EXPECT_EQ(accel_optimizer_zero_grad(optimizer), ACCEL_OK);
    const float value = scalar_of(loss);
    accel_tensor_free(loss);
    accel_tensor_free(logits);
    accel_output_free(output);
    accel_tensor_free(y);
    accel_tensor_free(x);
    return value;
  }
};

accel_train_step_t* make_step(const Trainer& setup, const std::vector<std::pair<const char*, const char*>>& settings) {
  accel_options_t* options = nullptr;
  EXPECT_EQ(accel_options_new(&options), ACCEL_OK);
  for (const auto& [key, value] : settings) EXPECT_EQ(accel_options_set(options, key, value), ACCEL_OK) << key;
  accel_train_step_t* step = nullptr;
  EXPECT_EQ(accel_train_step_new(&step, setup.model, setup.optimizer, options), ACCEL_OK) << last_error();
  accel_options_free(options);
  return step;
}

float run_step(accel_train_step_t* step, int b) {
  accel_tensor_t* x = floats(features(b), {6, 8});
  accel_tensor_t* y = classes(labels(b));
  accel_tensor_t* loss = nullptr;
  EXPECT_EQ(accel_train_step_run(step, &x, 1, nullptr, nullptr, 0, y, &loss), ACCEL_OK) << last_error();
  const float value = loss != nullptr ? scalar_of(loss) : NAN;
  accel_tensor_free(loss);
  accel_tensor_free(y);
  accel_tensor_free(x);
  return value;
}

double stat(const accel_train_step_t* step, const char* name) {
  double value = -1;
  EXPECT_EQ(accel_train_step_stat(step, name, &value), ACCEL_OK) << last_error();
  return value;
}

// The same weights and losses as the loop of separate calls, bit for bit, for SGD with momentum and AdamW,
// with clipping, and with accumulation over 3 micro-batches. (One process has one state, whose accumulation
// counter every state handle shares: the two runs take turns, not steps.)
TEST(TrainStepCapi, AnEagerStepIsTheLoopOfSeparateCalls) {
  const auto path = tiny_models::mlp(tiny_models::temp_file("train_step.pt"));
  for (const char* kind : {"sgd", "adamw"}) {
    for (const int accumulation : {1, 3}) {
      SCOPED_TRACE(std::string(kind) + ", accumulation " + std::to_string(accumulation));
      std::vector<float> manual_losses, manual_parameters;
      {
        Trainer manual(path, kind, accumulation);
        for (int b = 0; b < 9; ++b) manual_losses.push_back(manual.manual_step(b, 0.5));
        manual_parameters = parameters_of(manual.model);
      }
      Trainer stepped(path, kind, accumulation);
      accel_train_step_t* step = make_step(stepped, {{"max_grad_norm", "0.5"}});
      for (int b = 0; b < 9; ++b) EXPECT_EQ(run_step(step, b), manual_losses[b]) << "step " << b;
      EXPECT_EQ(parameters_of(stepped.model), manual_parameters);
      EXPECT_EQ(stat(step, "steps"), 9);
      EXPECT_EQ(stat(step, "eager_steps"), 9);
      EXPECT_EQ(stat(step, "replays"), 0);
      EXPECT_STREQ(accel_train_step_eager_reason(step), "cuda_graph is off");
      accel_train_step_free(step);
    }
  }
}

// Clipping makes a difference here, so the test above would see a step that skipped it.
TEST(TrainStepCapi, ClippingIsApplied) {
  const auto path = tiny_models::mlp(tiny_models::temp_file("train_step_clip.pt"));
  Trainer clipped(path, "sgd"), unclipped(path, "sgd");
  accel_train_step_t* a = make_step(clipped, {{"max_grad_norm", "0.01"}});
  accel_train_step_t* b = make_step(unclipped, {});
  for (int i = 0; i < 3; ++i) {
    run_step(a, i);
    run_step(b, i);
  }
  EXPECT_NE(parameters_of(clipped.model), parameters_of(unclipped.model));
  accel_train_step_free(a);
  accel_train_step_free(b);
}

// cuda_graph on a CPU state: every step eager, with the reason, and the same results as without it.
TEST(TrainStepCapi, CudaGraphOnTheCpuRunsEagerlyAndSaysWhy) {
  const auto path = tiny_models::mlp(tiny_models::temp_file("train_step_cpu.pt"));
  Trainer graph(path, "adamw"), plain(path, "adamw");
  accel_train_step_t* with_graph = make_step(graph, {{"cuda_graph", "true"}, {"cuda_graph_warmup", "1"}});
  accel_train_step_t* without = make_step(plain, {});
  for (int b = 0; b < 4; ++b) EXPECT_EQ(run_step(with_graph, b), run_step(without, b));
  EXPECT_EQ(parameters_of(graph.model), parameters_of(plain.model));
  EXPECT_NE(std::string(accel_train_step_eager_reason(with_graph)).find("CUDA"), std::string::npos)
      << accel_train_step_eager_reason(with_graph);
  EXPECT_EQ(stat(with_graph, "eager_steps"), 4);
  EXPECT_EQ(stat(with_graph, "captures"), 0);
  accel_train_step_free(with_graph);
  accel_train_step_free(without);
}

// A dict output: the loss applies to its "logits"; the loss "output" takes a loss the model computed.
TEST(TrainStepCapi, DictOutputsAndALossFromForward) {
  Trainer dict(tiny_models::dict_output(tiny_models::temp_file("train_step_dict.pt")), "sgd");
  accel_train_step_t* step = make_step(dict, {});
  const auto before = parameters_of(dict.model);
  EXPECT_TRUE(std::isfinite(run_step(step, 0)));
  EXPECT_NE(parameters_of(dict.model), before);
  accel_train_step_free(step);

  // forward's first output is a [6, 4] tensor: the loss "output" needs one number.
  Trainer plain(tiny_models::mlp(tiny_models::temp_file("train_step_output.pt")), "sgd");
  step = make_step(plain, {{"loss", "output"}});
  accel_tensor_t* x = floats(features(0), {6, 8});
  EXPECT_EQ(accel_train_step_run(step, &x, 1, nullptr, nullptr, 0, nullptr, nullptr), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("scalar"), std::string::npos) << last_error();
  accel_tensor_free(x);
  accel_train_step_free(step);
}

TEST(TrainStepCapi, BadSettingsAndBatchesAreRefused) {
  const auto path = tiny_models::mlp(tiny_models::temp_file("train_step_bad.pt"));
  Trainer setup(path, "sgd"), other(path, "sgd");
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  accel_train_step_t* step = nullptr;
  EXPECT_EQ(accel_options_set_string(options, "loss", "hinge"), ACCEL_ERR_BAD_OPTION_VALUE);
  ASSERT_EQ(accel_options_set_string(options, "reduction", "none"), ACCEL_OK);
  EXPECT_EQ(accel_train_step_new(&step, setup.model, setup.optimizer, options), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("reduction"), std::string::npos) << last_error();
  EXPECT_EQ(step, nullptr);
  ASSERT_EQ(accel_options_set_string(options, "reduction", "mean"), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(options, "max_grad_norm", -1), ACCEL_OK);
  EXPECT_EQ(accel_train_step_new(&step, setup.model, setup.optimizer, options), ACCEL_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(accel_options_set_double(options, "max_grad_norm", 0), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(options, "lr", 0.1), ACCEL_OK);
  EXPECT_EQ(accel_train_step_new(&step, setup.model, setup.optimizer, options), ACCEL_ERR_UNKNOWN_OPTION);
  accel_options_free(options);
  EXPECT_EQ(accel_train_step_new(&step, setup.model, other.optimizer, nullptr), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not made from this model"), std::string::npos) << last_error();
  EXPECT_EQ(accel_train_step_new(&step, nullptr, setup.optimizer, nullptr), ACCEL_ERR_NULL_ARGUMENT);

  step = make_step(setup, {});
  const auto before = parameters_of(setup.model);
  accel_tensor_t* x = floats(features(0), {6, 8});
  EXPECT_EQ(accel_train_step_run(step, &x, 1, nullptr, nullptr, 0, nullptr, nullptr), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("needs a target"), std::string::npos) << last_error();
  accel_tensor_t* out_of_range = classes({0, 1, 2, 3, 4, 0});
  EXPECT_EQ(accel_train_step_run(step, &x, 1, nullptr, nullptr, 0, out_of_range, nullptr), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("target 4 at row 4"), std::string::npos) << last_error();
  accel_tensor_t* wide = floats(std::vector<float>(18, 0.5f), {6, 3});
  accel_tensor_t* y = classes(labels(0));
  EXPECT_EQ(accel_train_step_run(step, &wide, 1, nullptr, nullptr, 0, y, nullptr), ACCEL_ERR_TORCH);
  EXPECT_EQ(parameters_of(setup.model), before);
  EXPECT_EQ(stat(step, "steps"), 0) << "a run that failed counted as a step";
  EXPECT_TRUE(std::isfinite(run_step(step, 0)));
  EXPECT_EQ(stat(step, "steps"), 1);
  double value = 0;
  EXPECT_EQ(accel_train_step_stat(step, "speed", &value), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("replays"), std::string::npos) << last_error();
  EXPECT_EQ(accel_train_step_eager_reason(nullptr), nullptr);
  accel_tensor_free(y);
  accel_tensor_free(wide);
  accel_tensor_free(out_of_range);
  accel_tensor_free(x);
  accel_train_step_free(step);
}

}  // namespace
