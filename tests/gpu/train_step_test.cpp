// One training step on the GPU through the C ABI, in fp32, bf16 and fp16, on one process: the state picks
// cuda:0, prepare moves the parameters there, forward runs under CUDA autocast, and under fp16 the grad
// scaler skips a step whose gradients overflowed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "accel.h"
#include "cuda_present.hpp"
#include "tiny_models.hpp"

namespace {

std::string last_error() { return accel_error_last(); }

bool on_cuda(const accel_tensor_t* tensor) { return std::string(accel_tensor_device(tensor)).rfind("cuda:", 0) == 0; }

std::vector<float> host_values(const accel_tensor_t* tensor) {
  std::vector<float> values(static_cast<size_t>(accel_tensor_numel(tensor)));
  EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, values.data(), values.size() * sizeof(float)), ACCEL_OK) << last_error();
  return values;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  return worst;
}

// Values spread over [-1, 1] that are not exactly representable in fp16 or bf16, so that low-precision
// arithmetic must round them.
std::vector<float> spread(size_t n, float phase) {
  std::vector<float> values;
  for (size_t i = 0; i < n; ++i) values.push_back(std::sin(0.37f * static_cast<float>(i) + phase));
  return values;
}

class GpuTrain : public ::testing::Test {
 protected:
  // A state with this mixed precision, and the tiny MLP prepared on it with an SGD optimizer.
  void start(const char* mixed_precision) {
    accel_options_t* options = nullptr;
    ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
    ASSERT_EQ(accel_options_set_string(options, "mixed_precision", mixed_precision), ACCEL_OK);
    ASSERT_EQ(accel_state_new(&state, options), ACCEL_OK) << last_error();
    accel_options_free(options);
    ASSERT_STREQ(accel_state_device(state), "cuda:0");
    ASSERT_STREQ(accel_state_mixed_precision(state), mixed_precision);
    model_path = tiny_models::mlp(tiny_models::temp_file("gpu_train.pt"));
    ASSERT_EQ(accel_model_load(&model, model_path.c_str()), ACCEL_OK) << last_error();
    ASSERT_EQ(accel_state_prepare_model(state, model, nullptr), ACCEL_OK) << last_error();
    accel_options_t* sgd = nullptr;
    ASSERT_EQ(accel_options_new(&sgd), ACCEL_OK);
    ASSERT_EQ(accel_options_set_double(sgd, "lr", 0.1), ACCEL_OK);
    ASSERT_EQ(accel_optimizer_new(&optimizer, model, "sgd", sgd), ACCEL_OK) << last_error();
    accel_options_free(sgd);
  }

  void TearDown() override {
    accel_optimizer_free(optimizer);
    accel_model_free(model);
    accel_state_free(state);
    if (!model_path.empty()) std::remove(model_path.c_str());
  }

  // A [rows, cols] fp32 tensor on the state's device.
  accel_tensor_t* on_device(const std::vector<float>& values, int64_t rows, int64_t cols) {
    const int64_t shape[] = {rows, cols};
    accel_tensor_t* host = nullptr;
    EXPECT_EQ(accel_tensor_from_buffer(&host, values.data(), ACCEL_DTYPE_FLOAT32, shape, 2), ACCEL_OK) << last_error();
    accel_tensor_t* device = nullptr;
    EXPECT_EQ(accel_state_send_to_device(state, host, 0, &device), ACCEL_OK) << last_error();
    accel_tensor_free(host);
    return device;
  }

  std::vector<std::vector<float>> parameters() {
    std::vector<std::vector<float>> all;
    for (size_t i = 0; i < accel_model_num_parameters(model); ++i) {
      accel_tensor_t* parameter = nullptr;
      EXPECT_EQ(accel_model_parameter(model, i, &parameter), ACCEL_OK) << last_error();
      EXPECT_TRUE(on_cuda(parameter)) << accel_model_parameter_name(model, i) << " is on " << accel_tensor_device(parameter);
      EXPECT_EQ(accel_tensor_dtype(parameter), ACCEL_DTYPE_FLOAT32) << "master weights stay fp32";
      all.push_back(host_values(parameter));
      accel_tensor_free(parameter);
    }
    return all;
  }

  // forward, mse loss, backward, optimizer step, zero_grad; returns the loss and the model's output.
  double step(const std::vector<float>& x_values, std::vector<float>* output_values = nullptr) {
    accel_tensor_t* x = on_device(x_values, 4, 8);
    accel_tensor_t* target = on_device(spread(16, 1.0f), 4, 4);
    EXPECT_EQ(accel_state_accumulate(state), ACCEL_OK);
    accel_output_t* output = nullptr;
    EXPECT_EQ(accel_model_forward(model, &x, 1, nullptr, nullptr, 0, &output), ACCEL_OK) << last_error();
    accel_tensor_t* out = nullptr;
    EXPECT_EQ(accel_output_get(output, 0, &out), ACCEL_OK);
    EXPECT_TRUE(on_cuda(out)) << accel_tensor_device(out);
    EXPECT_EQ(accel_tensor_dtype(out), ACCEL_DTYPE_FLOAT32) << "convert_outputs_to_fp32 is on by default";
    if (output_values != nullptr) *output_values = host_values(out);
    accel_tensor_t* loss = nullptr;
    EXPECT_EQ(accel_loss_compute(&loss, "mse", out, target, nullptr), ACCEL_OK) << last_error();
    EXPECT_TRUE(on_cuda(loss)) << accel_tensor_device(loss);
    const double loss_value = host_values(loss).at(0);
    EXPECT_EQ(accel_state_backward(state, loss), ACCEL_OK) << last_error();
    EXPECT_EQ(accel_optimizer_step(optimizer), ACCEL_OK) << last_error();
    EXPECT_EQ(accel_optimizer_zero_grad(optimizer), ACCEL_OK) << last_error();
    accel_tensor_free(loss);
    accel_tensor_free(out);
    accel_output_free(output);
    accel_tensor_free(target);
    accel_tensor_free(x);
    return loss_value;
  }

  // The same model, unprepared, on the CPU in fp32: what the GPU forward is compared with.
  std::vector<float> cpu_fp32_output(const std::vector<float>& x_values) {
    accel_model_t* reference = nullptr;
    EXPECT_EQ(accel_model_load(&reference, model_path.c_str()), ACCEL_OK) << last_error();
    const int64_t shape[] = {4, 8};
    accel_tensor_t* x = nullptr;
    EXPECT_EQ(accel_tensor_from_buffer(&x, x_values.data(), ACCEL_DTYPE_FLOAT32, shape, 2), ACCEL_OK);
    accel_output_t* output = nullptr;
    EXPECT_EQ(accel_model_evaluate(reference, &x, 1, nullptr, nullptr, 0, &output), ACCEL_OK) << last_error();
    accel_tensor_t* out = nullptr;
    EXPECT_EQ(accel_output_get(output, 0, &out), ACCEL_OK);
    EXPECT_STREQ(accel_tensor_device(out), "cpu");
    auto values = host_values(out);
    accel_tensor_free(out);
    accel_output_free(output);
    accel_tensor_free(x);
    accel_model_free(reference);
    return values;
  }

  double loss_scale() {
    double scale = 0;
    EXPECT_EQ(accel_optimizer_loss_scale(optimizer, &scale), ACCEL_OK) << last_error();
    return scale;
  }

  // One clean step: finite loss, every parameter moved on the GPU, and the forward within `tolerance` of
  // fp32 on the CPU; with `rounds`, a low-precision forward must also differ from it (autocast was on).
  void expect_a_clean_step(double tolerance, bool rounds) {
    const auto x = spread(32, 0.0f);
    const auto before = parameters();
    std::vector<float> output;
    const double loss = step(x, &output);
    EXPECT_TRUE(std::isfinite(loss)) << loss;
    EXPECT_GT(loss, 0.0);
    EXPECT_EQ(accel_optimizer_step_was_skipped(optimizer), 0);
    const auto after = parameters();
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_GT(max_difference(after[i], before[i]), 0.0) << accel_model_parameter_name(model, i) << " did not move";
    }
    const double difference = max_difference(output, cpu_fp32_output(x));
    EXPECT_LT(difference, tolerance);
    if (rounds) EXPECT_GT(difference, 0.0) << "the forward did not run in low precision";
  }

  accel_state_t* state = nullptr;
  accel_model_t* model = nullptr;
  accel_optimizer_t* optimizer = nullptr;
  std::string model_path;
};

TEST_F(GpuTrain, Fp32StepMovesTheParametersOnTheGpu) {
  SKIP_WITHOUT_CUDA();
  ASSERT_NO_FATAL_FAILURE(start("no"));
  // TF32 is off for fp32 matmuls unless a program turns it on, so the GPU agrees with the CPU closely.
  expect_a_clean_step(1e-5, false);
  EXPECT_EQ(loss_scale(), 1.0);
}

TEST_F(GpuTrain, Bf16StepRunsUnderCudaAutocast) {
  SKIP_WITHOUT_CUDA();
  ASSERT_NO_FATAL_FAILURE(start("bf16"));
  expect_a_clean_step(0.1, true);
  EXPECT_EQ(loss_scale(), 1.0);
}

TEST_F(GpuTrain, Fp16StepRunsUnderCudaAutocastWithTheScaler) {
  SKIP_WITHOUT_CUDA();
  ASSERT_NO_FATAL_FAILURE(start("fp16"));
  expect_a_clean_step(0.05, true);
  EXPECT_EQ(loss_scale(), 65536.0);
}

// Inputs beyond fp16's largest value (65504) become inf when autocast casts them for the first matmul, so
// every gradient is inf or NaN: the scaler must skip the step, leave the parameters alone and halve the
// scale, and the next clean step must go through at the halved scale.
TEST_F(GpuTrain, Fp16OverflowSkipsTheStepAndHalvesTheScale) {
  SKIP_WITHOUT_CUDA();
  ASSERT_NO_FATAL_FAILURE(start("fp16"));
  step(spread(32, 0.0f));
  ASSERT_EQ(accel_optimizer_step_was_skipped(optimizer), 0);
  ASSERT_EQ(loss_scale(), 65536.0);
  const auto before = parameters();

  const double loss = step(std::vector<float>(32, 1e5f));
  EXPECT_FALSE(std::isfinite(loss)) << loss;
  EXPECT_EQ(accel_optimizer_step_was_skipped(optimizer), 1);
  EXPECT_EQ(parameters(), before);
  EXPECT_EQ(loss_scale(), 32768.0);

  EXPECT_TRUE(std::isfinite(step(spread(32, 0.5f))));
  EXPECT_EQ(accel_optimizer_step_was_skipped(optimizer), 0);
  EXPECT_NE(parameters(), before);
  EXPECT_EQ(loss_scale(), 32768.0);
}

// A class index outside [0, C) must come back as an error naming the row, not as a device-side assert
// that would leave the CUDA context unusable; ignore_index rows pass.
TEST_F(GpuTrain, CrossEntropyTargetsAreCheckedOnTheGpu) {
  SKIP_WITHOUT_CUDA();
  ASSERT_NO_FATAL_FAILURE(start("no"));
  accel_tensor_t* logits = on_device(spread(16, 0.0f), 4, 4);
  auto compute = [&](std::vector<int64_t> classes) {
    const int64_t shape[] = {4};
    accel_tensor_t *host = nullptr, *target = nullptr, *loss = nullptr;
    EXPECT_EQ(accel_tensor_from_buffer(&host, classes.data(), ACCEL_DTYPE_INT64, shape, 1), ACCEL_OK);
    EXPECT_EQ(accel_state_send_to_device(state, host, 0, &target), ACCEL_OK) << last_error();
    const int code = accel_loss_compute(&loss, "cross_entropy", logits, target, nullptr);
    accel_tensor_free(loss);
    accel_tensor_free(target);
    accel_tensor_free(host);
    return code;
  };
  EXPECT_EQ(compute({0, 1, 2, 3}), ACCEL_OK) << last_error();
  EXPECT_EQ(compute({0, -100, 3, -100}), ACCEL_OK) << last_error();
  EXPECT_EQ(compute({0, 1, 4, 3}), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("target 4 at row 2"), std::string::npos) << last_error();
  EXPECT_EQ(compute({-1, 1, 2, 3}), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("target -1 at row 0"), std::string::npos) << last_error();
  EXPECT_EQ(compute({0, 1, 2, 3}), ACCEL_OK) << "the context still works: " << last_error();
  accel_tensor_free(logits);
}

}  // namespace
