// Models, optimizers, schedulers, losses and save_model through the C ABI on one process.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
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

class TrainCapi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(accel_state_new(&state, nullptr), ACCEL_OK) << last_error();
    ASSERT_EQ(accel_model_load(&model, tiny_models::mlp(tiny_models::temp_file("capi.pt")).c_str()), ACCEL_OK) << last_error();
    ASSERT_EQ(accel_state_prepare_model(state, model, nullptr), ACCEL_OK) << last_error();
    x = floats(std::vector<float>(16, 0.5f), {2, 8});
  }
  void TearDown() override {
    accel_tensor_free(x);
    accel_model_free(model);
    accel_state_free(state);
  }
  accel_tensor_t* forward_first() {
    accel_output_t* output = nullptr;
    EXPECT_EQ(accel_model_forward(model, &x, 1, nullptr, nullptr, 0, &output), ACCEL_OK) << last_error();
    accel_tensor_t* first = nullptr;
    EXPECT_EQ(accel_output_get(output, 0, &first), ACCEL_OK);
    accel_output_free(output);
    return first;
  }

  accel_state_t* state = nullptr;
  accel_model_t* model = nullptr;
  accel_tensor_t* x = nullptr;
};

TEST_F(TrainCapi, ATrainingStepMovesTheParametersAndTheScheduleFollows) {
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(options, "lr", 0.5), ACCEL_OK);
  ASSERT_EQ(accel_options_set_string(options, "no_decay", "*b1,*b2"), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(options, "weight_decay", 0.01), ACCEL_OK);
  accel_options_t* schedule = nullptr;
  ASSERT_EQ(accel_options_new(&schedule), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(schedule, "total_steps", 10), ACCEL_OK);
  accel_optimizer_t* optimizer = nullptr;
  ASSERT_EQ(accel_optimizer_new(&optimizer, model, "adamw", options), ACCEL_OK) << last_error();
  EXPECT_EQ(accel_optimizer_num_groups(optimizer), 2u);
  accel_scheduler_t* scheduler = nullptr;
  EXPECT_EQ(accel_scheduler_new(&scheduler, optimizer, "linear", options), ACCEL_ERR_UNKNOWN_OPTION);
  EXPECT_NE(last_error().find("belongs to the optimizer (accel_optimizer_new)"), std::string::npos) << last_error();
  ASSERT_EQ(accel_scheduler_new(&scheduler, optimizer, "linear", schedule), ACCEL_OK) << last_error();
  accel_tensor_t* w1 = nullptr;
  ASSERT_EQ(accel_model_parameter(model, 0, &w1), ACCEL_OK);
  EXPECT_STREQ(accel_model_parameter_name(model, 0), "w1");
  float before = 0;
  void* data = nullptr;
  ASSERT_EQ(accel_tensor_data(w1, &data), ACCEL_OK);
  before = static_cast<float*>(data)[0];

  ASSERT_EQ(accel_state_accumulate(state), ACCEL_OK);
  EXPECT_EQ(accel_state_sync_gradients(state), 1);
  accel_tensor_t* out = forward_first();
  accel_tensor_t* target = floats(std::vector<float>(8, 1.0f), {2, 4});
  accel_tensor_t* loss = nullptr;
  ASSERT_EQ(accel_loss_compute(&loss, "mse", out, target, nullptr), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_state_backward(state, loss), ACCEL_OK) << last_error();
  double norm = 0;
  ASSERT_EQ(accel_state_clip_grad_norm(state, model, 100.0, 2.0, &norm), ACCEL_OK) << last_error();
  EXPECT_GT(norm, 0);
  ASSERT_EQ(accel_optimizer_step(optimizer), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_scheduler_step(scheduler), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_optimizer_zero_grad(optimizer), ACCEL_OK);
  EXPECT_NE(static_cast<float*>(data)[0], before);  // the DLPack-able view sees the update: zero-copy
  double last_lr = 0;
  ASSERT_EQ(accel_scheduler_last_lr(scheduler, 0, &last_lr), ACCEL_OK);
  EXPECT_NEAR(last_lr, 0.45, 1e-12);
  EXPECT_EQ(accel_scheduler_last_lr(scheduler, 7, &last_lr), ACCEL_ERR_OUT_OF_RANGE);
  EXPECT_EQ(accel_scheduler_step_count(scheduler), 1);
  EXPECT_EQ(accel_optimizer_step_was_skipped(optimizer), 0);
  double loss_scale = 0;
  ASSERT_EQ(accel_optimizer_loss_scale(optimizer, &loss_scale), ACCEL_OK);
  EXPECT_EQ(loss_scale, 1.0);

  accel_tensor_free(loss);
  accel_tensor_free(target);
  accel_tensor_free(out);
  accel_tensor_free(w1);
  accel_scheduler_free(scheduler);
  accel_optimizer_free(optimizer);
  accel_options_free(schedule);
  accel_options_free(options);
}

namespace callback {

int halving(int64_t step, double* multiplier, void* payload) {
  ++*static_cast<int*>(payload);
  *multiplier = step == 0 ? 1.0 : 0.5;
  return 0;
}

int failing_after_first(int64_t step, double* multiplier, void*) {
  *multiplier = 1.0;
  return step == 0 ? 0 : 7;
}

}  // namespace callback

TEST_F(TrainCapi, CallbackSchedulerReportsTheCallbacksFailure) {
  accel_optimizer_t* optimizer = nullptr;
  ASSERT_EQ(accel_optimizer_new(&optimizer, model, "sgd", nullptr), ACCEL_OK) << last_error();
  int calls = 0;
  accel_scheduler_t* scheduler = nullptr;
  ASSERT_EQ(accel_scheduler_from_callback(&scheduler, optimizer, callback::halving, &calls), ACCEL_OK) << last_error();
  accel_scheduler_t* failing = nullptr;
  ASSERT_EQ(accel_scheduler_from_callback(&failing, optimizer, callback::failing_after_first, nullptr), ACCEL_OK);

  ASSERT_EQ(accel_state_accumulate(state), ACCEL_OK);
  ASSERT_EQ(accel_scheduler_step(scheduler), ACCEL_OK) << last_error();
  double lr = 0;
  ASSERT_EQ(accel_optimizer_lr(optimizer, 0, &lr), ACCEL_OK);
  EXPECT_DOUBLE_EQ(lr, 0.5e-3);
  EXPECT_GE(calls, 2);
  EXPECT_EQ(accel_optimizer_lr(optimizer, 3, &lr), ACCEL_ERR_OUT_OF_RANGE);

  EXPECT_EQ(accel_scheduler_step(failing), ACCEL_ERR_CALLBACK);
  EXPECT_NE(last_error().find("returned 7 for step 1"), std::string::npos) << last_error();
  accel_scheduler_free(failing);
  accel_scheduler_free(scheduler);
  accel_optimizer_free(optimizer);
}

TEST_F(TrainCapi, OneCycleCyclesTheMomentumTheOptimizerReports) {
  accel_options_t* sgd_options = nullptr;
  ASSERT_EQ(accel_options_new(&sgd_options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(sgd_options, "momentum", 0.9), ACCEL_OK);
  accel_optimizer_t* sgd = nullptr;
  ASSERT_EQ(accel_optimizer_new(&sgd, model, "sgd", sgd_options), ACCEL_OK) << last_error();
  double momentum = 0, beta1 = 0, beta2 = 0;
  ASSERT_EQ(accel_optimizer_momentum(sgd, 0, &momentum), ACCEL_OK) << last_error();
  EXPECT_EQ(momentum, 0.9);
  EXPECT_EQ(accel_optimizer_betas(sgd, 0, &beta1, &beta2), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("a sgd optimizer has no betas"), std::string::npos) << last_error();
  EXPECT_EQ(accel_optimizer_momentum(sgd, 5, &momentum), ACCEL_ERR_OUT_OF_RANGE);
  EXPECT_EQ(accel_optimizer_momentum(sgd, 0, nullptr), ACCEL_ERR_NULL_ARGUMENT);

  accel_options_t* cycle = nullptr;
  ASSERT_EQ(accel_options_new(&cycle), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(cycle, "max_lr", 0.5), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(cycle, "total_steps", 10), ACCEL_OK);
  accel_scheduler_t* scheduler = nullptr;
  ASSERT_EQ(accel_scheduler_new(&scheduler, sgd, "one_cycle", cycle), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_optimizer_momentum(sgd, 0, &momentum), ACCEL_OK);
  EXPECT_NEAR(momentum, 0.95, 1e-15);  // max_momentum once the scheduler is made
  ASSERT_EQ(accel_state_accumulate(state), ACCEL_OK);
  ASSERT_EQ(accel_scheduler_step(scheduler), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_scheduler_step(scheduler), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_optimizer_momentum(sgd, 0, &momentum), ACCEL_OK);
  EXPECT_EQ(momentum, 0.85);  // at the peak of the lr (step 0.3 * 10 - 1 = 2): base_momentum
  double lr = 0;
  ASSERT_EQ(accel_scheduler_last_lr(scheduler, 0, &lr), ACCEL_OK);
  EXPECT_EQ(lr, 0.5);
  EXPECT_EQ(accel_scheduler_step_with_metric(scheduler, 1.0), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("the one_cycle schedule takes no metric"), std::string::npos) << last_error();
  accel_scheduler_free(scheduler);
  accel_optimizer_free(sgd);

  accel_optimizer_t* adamw = nullptr;
  ASSERT_EQ(accel_optimizer_new(&adamw, model, "adamw", nullptr), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_optimizer_betas(adamw, 0, &beta1, &beta2), ACCEL_OK) << last_error();
  EXPECT_EQ(beta1, 0.9);
  EXPECT_EQ(beta2, 0.999);
  ASSERT_EQ(accel_options_set_double(cycle, "max_momentum", 0.98), ACCEL_OK);
  ASSERT_EQ(accel_scheduler_new(&scheduler, adamw, "one_cycle", cycle), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_optimizer_betas(adamw, 0, &beta1, &beta2), ACCEL_OK);
  EXPECT_NEAR(beta1, 0.98, 1e-15);  // Adam's momentum is beta1
  EXPECT_EQ(beta2, 0.999);
  ASSERT_EQ(accel_optimizer_momentum(adamw, 0, &momentum), ACCEL_OK);
  EXPECT_EQ(momentum, beta1);
  accel_scheduler_free(scheduler);
  accel_optimizer_free(adamw);
  accel_options_free(cycle);
  accel_options_free(sgd_options);
}

TEST_F(TrainCapi, ReduceOnPlateauStepsWithAMetric) {
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(options, "patience", 1), ACCEL_OK);
  ASSERT_EQ(accel_options_set_string(options, "mode", "max"), ACCEL_OK);
  EXPECT_EQ(accel_options_set_string(options, "threshold_mode", "relative"), ACCEL_ERR_BAD_OPTION_VALUE);
  accel_optimizer_t* optimizer = nullptr;
  ASSERT_EQ(accel_optimizer_new(&optimizer, model, "sgd", nullptr), ACCEL_OK) << last_error();
  accel_scheduler_t* scheduler = nullptr;
  ASSERT_EQ(accel_scheduler_new(&scheduler, optimizer, "reduce_on_plateau", options), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_state_accumulate(state), ACCEL_OK);
  EXPECT_EQ(accel_scheduler_step(scheduler), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("accel_scheduler_step_with_metric"), std::string::npos) << last_error();
  double lr = 0;
  for (double accuracy : {0.5, 0.6, 0.6}) {  // mode max: 0.6 improves, the second 0.6 is the first bad one
    ASSERT_EQ(accel_scheduler_step_with_metric(scheduler, accuracy), ACCEL_OK) << last_error();
    ASSERT_EQ(accel_optimizer_lr(optimizer, 0, &lr), ACCEL_OK);
    EXPECT_EQ(lr, 1e-3);
  }
  ASSERT_EQ(accel_scheduler_step_with_metric(scheduler, 0.59), ACCEL_OK) << last_error();  // the second: reduced
  ASSERT_EQ(accel_scheduler_last_lr(scheduler, 0, &lr), ACCEL_OK);
  EXPECT_DOUBLE_EQ(lr, 1e-4);
  EXPECT_EQ(accel_scheduler_step_count(scheduler), 4);
  EXPECT_EQ(accel_scheduler_step_with_metric(nullptr, 1.0), ACCEL_ERR_NULL_ARGUMENT);
  accel_scheduler_free(scheduler);

  ASSERT_EQ(accel_options_set_string(options, "milestones", "3,x"), ACCEL_OK);  // checked when a scheduler reads it
  EXPECT_EQ(accel_scheduler_new(&scheduler, optimizer, "multistep", options), ACCEL_ERR_BAD_OPTION_VALUE);
  EXPECT_NE(last_error().find("'3,x' is not a comma-separated list of steps"), std::string::npos) << last_error();
  EXPECT_EQ(scheduler, nullptr);
  accel_optimizer_free(optimizer);
  accel_options_free(options);
}

// One process: no all-reduce, so every figure is 0; the names are checked all the same.
TEST_F(TrainCapi, GradSyncFiguresAreZeroWithoutDataParallelismAndNamesAreChecked) {
  double value = -1;
  ASSERT_EQ(accel_model_grad_sync_stat(model, "overlapped_ms", &value), ACCEL_OK) << last_error();
  EXPECT_EQ(value, 0);
  ASSERT_EQ(accel_model_grad_sync_stat(model, "last_bytes", &value), ACCEL_OK) << last_error();
  EXPECT_EQ(value, 0);
  EXPECT_EQ(accel_model_grad_sync_stat(model, "overlap", &value), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("helper_cpu_ms"), std::string::npos) << last_error();
  EXPECT_EQ(accel_model_grad_sync_stat(model, nullptr, &value), ACCEL_ERR_NULL_ARGUMENT);
}

TEST(ModelOptions, GradCompressionTakesNoBf16OrFp16Only) {
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  for (const char* good : {"no", "bf16", "fp16"}) EXPECT_EQ(accel_options_set_string(options, "grad_compression", good), ACCEL_OK);
  EXPECT_EQ(accel_options_set_string(options, "grad_compression", "int8"), ACCEL_ERR_BAD_OPTION_VALUE);
  EXPECT_NE(last_error().find("grad_compression"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("bf16"), std::string::npos) << last_error();
  accel_options_free(options);
}

TEST_F(TrainCapi, DictAndTupleOutputsAndEvaluationWithoutGraph) {
  accel_model_t* dict_model = nullptr;
  ASSERT_EQ(accel_model_load(&dict_model, tiny_models::dict_output(tiny_models::temp_file("dict.pt")).c_str()), ACCEL_OK);
  accel_output_t* output = nullptr;
  ASSERT_EQ(accel_model_evaluate(dict_model, &x, 1, nullptr, nullptr, 0, &output), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_output_count(output), 2u);
  accel_tensor_t* logits = nullptr;
  ASSERT_EQ(accel_output_get_named(output, "logits", &logits), ACCEL_OK);
  EXPECT_EQ(accel_tensor_shape(logits)[1], 4);
  EXPECT_EQ(accel_output_get_named(output, "nope", &logits), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("logits"), std::string::npos);
  accel_tensor_t* loss = nullptr;
  ASSERT_EQ(accel_output_get(output, 0, &loss), ACCEL_OK);
  accel_state_t* plain = state;
  EXPECT_EQ(accel_state_backward(plain, loss), ACCEL_ERR_INVALID_ARGUMENT);  // not a scalar
  accel_tensor_free(loss);
  accel_output_free(output);
  accel_model_free(dict_model);

  accel_model_t* tuple_model = nullptr;
  ASSERT_EQ(accel_model_load(&tuple_model, tiny_models::tuple_output(tiny_models::temp_file("tuple.pt")).c_str()), ACCEL_OK);
  ASSERT_EQ(accel_model_forward(tuple_model, &x, 1, nullptr, nullptr, 0, &output), ACCEL_OK) << last_error();
  EXPECT_EQ(accel_output_count(output), 2u);
  EXPECT_EQ(accel_output_name(output, 0), nullptr);
  accel_output_free(output);
  accel_model_free(tuple_model);
}

TEST_F(TrainCapi, BadInputGetsClearErrors) {
  accel_model_t* bad = nullptr;
  const std::string garbage = tiny_models::temp_file("garbage.pt");
  std::FILE* file = std::fopen(garbage.c_str(), "w");
  std::fputs("not a model", file);
  std::fclose(file);
  EXPECT_EQ(accel_model_load(&bad, garbage.c_str()), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not a TorchScript model"), std::string::npos) << last_error();
  EXPECT_EQ(accel_model_load(&bad, "/nonexistent/model.pt"), ACCEL_ERR_IO);
  std::remove(garbage.c_str());
  accel_optimizer_t* optimizer = nullptr;
  EXPECT_EQ(accel_optimizer_new(&optimizer, model, "lion", nullptr), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("lion"), std::string::npos) << last_error();
  ASSERT_EQ(accel_optimizer_new(&optimizer, model, "sgd", nullptr), ACCEL_OK) << last_error();
  accel_scheduler_t* scheduler = nullptr;
  EXPECT_EQ(accel_scheduler_new(&scheduler, optimizer, "sawtooth", nullptr), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("sawtooth"), std::string::npos) << last_error();
  accel_optimizer_free(optimizer);
  accel_tensor_t* out = forward_first();
  accel_tensor_t* float_labels = floats({0, 1}, {2});
  accel_tensor_t* loss = nullptr;
  EXPECT_EQ(accel_loss_compute(&loss, "cross_entropy", out, float_labels, nullptr), ACCEL_ERR_DTYPE);
  EXPECT_EQ(accel_loss_compute(&loss, "hinge", out, float_labels, nullptr), ACCEL_ERR_INVALID_ARGUMENT);
  accel_tensor_t* wrong = floats(std::vector<float>(3, 0.0f), {3});
  accel_tensor_t* wrong_input = nullptr;
  EXPECT_EQ(accel_model_forward(model, &wrong, 1, nullptr, nullptr, 0, reinterpret_cast<accel_output_t**>(&wrong_input)),
            ACCEL_ERR_TORCH);
  accel_tensor_free(wrong);
  accel_tensor_free(float_labels);
  accel_tensor_free(out);
  EXPECT_EQ(accel_state_prepare_model(state, model, nullptr), ACCEL_ERR_INVALID_STATE);
}

// C booleans are 0 or 1 and a learning rate is finite: 5, -1 and +inf were taken.
TEST_F(TrainCapi, BooleansOtherThanZeroOrOneAndInfiniteRatesAreRefused) {
  for (const int on : {5, -1, 2}) {
    EXPECT_EQ(accel_model_train(model, on), ACCEL_ERR_INVALID_ARGUMENT) << on;
    EXPECT_NE(last_error().find("argument 'on' is " + std::to_string(on) + ", not 0 or 1"), std::string::npos)
        << last_error();
  }
  EXPECT_EQ(accel_model_train(model, 0), ACCEL_OK);
  EXPECT_EQ(accel_model_train(model, 1), ACCEL_OK);
  accel_tensor_t* split = nullptr;
  EXPECT_EQ(accel_state_split_tensor(state, x, 2, &split), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(accel_state_send_to_device(state, x, -1, &split), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(accel_state_pad_across_processes(state, x, 0, 0.0, 3, &split), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(accel_state_set_seed(state, 1, 7), ACCEL_ERR_INVALID_ARGUMENT);
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  EXPECT_EQ(accel_options_set_bool(options, "shuffle", 5), ACCEL_ERR_BAD_OPTION_VALUE);
  EXPECT_NE(last_error().find("option 'shuffle': a boolean is 0 or 1, got 5"), std::string::npos) << last_error();
  accel_options_free(options);

  accel_optimizer_t* optimizer = nullptr;
  ASSERT_EQ(accel_optimizer_new(&optimizer, model, "sgd", nullptr), ACCEL_OK) << last_error();
  double lr = 0;
  ASSERT_EQ(accel_optimizer_lr(optimizer, 0, &lr), ACCEL_OK);
  for (const double bad : {HUGE_VAL, -HUGE_VAL, std::nan("")}) {
    EXPECT_EQ(accel_optimizer_set_lr(optimizer, 0, bad), ACCEL_ERR_INVALID_ARGUMENT) << bad;
  }
  double unchanged = -1;
  ASSERT_EQ(accel_optimizer_lr(optimizer, 0, &unchanged), ACCEL_OK);
  EXPECT_EQ(unchanged, lr);
  accel_optimizer_free(optimizer);
}

// c10::Error::what() ends with one line per C++ frame; a user's error message must not.
TEST_F(TrainCapi, LibTorchErrorsCarryNoBacktrace) {
  const auto expect_clean = [](int code, int expected, const char* call) {
    EXPECT_EQ(code, expected) << call << ": " << last_error();
    EXPECT_EQ(last_error().find("frame #"), std::string::npos) << call << ": " << last_error();
  };
  expect_clean(accel_model_save_torchscript(model, ""), ACCEL_ERR_IO, "save to ''");
  accel_tensor_t* wrong = floats(std::vector<float>(3, 0.0f), {1, 3});
  accel_output_t* output = nullptr;
  expect_clean(accel_model_forward(model, &wrong, 1, nullptr, nullptr, 0, &output), ACCEL_ERR_TORCH, "forward [1, 3]");
  accel_tensor_t* two[] = {x, x};
  expect_clean(accel_model_forward(model, two, 2, nullptr, nullptr, 0, &output), ACCEL_ERR_TORCH, "forward of two inputs");
  accel_tensor_free(wrong);
  const std::string text = tiny_models::temp_file("text.pt");
  std::ofstream(text) << "not a model";
  accel_model_t* loaded = nullptr;
  expect_clean(accel_model_load(&loaded, text.c_str()), ACCEL_ERR_INVALID_ARGUMENT, "load a text file");
  expect_clean(accel_model_load_buffer(&loaded, "PK\3\4 not a zip", 14), ACCEL_ERR_INVALID_ARGUMENT, "load a non-zip");
  std::remove(text.c_str());
}

// LibTorch trusts a storage record to be as long as its tensors say: a truncated one was loaded and then
// read and written past its end.
TEST(ModelFile, StorageShorterThanItsTensorIsRefused) {
  const std::string path = tiny_models::mlp_with_truncated_storage(tiny_models::temp_file("truncated.pt"));
  accel_model_t* model = nullptr;
  EXPECT_EQ(accel_model_load(&model, path.c_str()), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(model, nullptr);
  const std::string message = last_error();
  EXPECT_NE(message.find("'" + path + "': parameter 'w1' needs 512 bytes but its storage holds 100"), std::string::npos)
      << message;
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  const std::string buffer = bytes.str();
  EXPECT_EQ(accel_model_load_buffer(&model, buffer.data(), buffer.size()), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("the buffer: parameter 'w1'"), std::string::npos) << last_error();
  EXPECT_EQ(model, nullptr);
  std::remove(path.c_str());
}

// An empty storage record leaves its storage without any data (a null pointer behind the size the tensor
// states), which the first read of the parameter followed.
TEST(ModelFile, EmptyStorageRecordIsRefused) {
  const std::string path = tiny_models::mlp_with_truncated_storage(tiny_models::temp_file("empty.pt"), 0);
  accel_model_t* model = nullptr;
  EXPECT_EQ(accel_model_load(&model, path.c_str()), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(last_error().find("'" + path + "': parameter 'w1' needs 512 bytes but its storage holds 0"), std::string::npos)
      << last_error();
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  const std::string buffer = bytes.str();
  EXPECT_EQ(accel_model_load_buffer(&model, buffer.data(), buffer.size()), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("the buffer: parameter 'w1' needs 512 bytes but its storage holds 0"), std::string::npos)
      << last_error();
  EXPECT_EQ(model, nullptr);
  std::remove(path.c_str());
}

// A pickle that announces a string of 2 GB (one byte of data.pkl changed, as fuzz_model_load found it):
// LibTorch's unpickler allocated the 2 GB before finding the bytes missing.
TEST(ModelFile, APickleAnnouncingMoreThanItHoldsIsRefusedUnread) {
  const std::string path = tiny_models::mlp(tiny_models::temp_file("overlong.pt"));
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  std::string buffer = bytes.str();
  const std::string device = std::string("X\x03\x00\x00\x00" "cpu", 8);  // BINUNICODE "cpu", stored uncompressed
  const size_t at = buffer.find(device);
  ASSERT_NE(at, std::string::npos);
  buffer[at + 4] = '\x7e';
  accel_model_t* model = nullptr;
  EXPECT_EQ(accel_model_load_buffer(&model, buffer.data(), buffer.size()), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("the buffer is not a TorchScript model: record 'data.pkl' is a pickle with an argument of "
                              "2113929219 bytes"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(model, nullptr);
  std::remove(path.c_str());
}

// free_memory: a loader on its last batch is no longer tracked, so gather_for_metrics keeps every row
// instead of the last global batch's real ones; the loader goes on working (the Python tests check the
// accumulation counter, which needs a state with gradient_accumulation_steps > 1).
TEST_F(TrainCapi, FreeMemoryForgetsLoadersInAnEpoch) {
  accel_tensor_t* rows = floats({0, 1, 2}, {3});
  const char* names[] = {"x"};
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_tensors(&dataset, names, &rows, 1), ACCEL_OK);
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(options, "batch_size", 2), ACCEL_OK);
  accel_loader_t* loader = nullptr;
  ASSERT_EQ(accel_loader_new(&loader, state, dataset, options), ACCEL_OK) << last_error();
  accel_batch_t* batch = nullptr;
  for (int b = 0; b < 2; ++b) {
    ASSERT_EQ(accel_loader_next(loader, &batch), ACCEL_OK);
    accel_batch_free(batch);
  }
  ASSERT_EQ(accel_loader_end_of_dataloader(loader), 1);
  const auto gathered_rows = [&] {
    accel_tensor_t* all = nullptr;
    EXPECT_EQ(accel_state_gather_for_metrics(state, x, &all), ACCEL_OK) << last_error();
    const int64_t count = accel_tensor_shape(all)[0];
    accel_tensor_free(all);
    return count;
  };
  EXPECT_EQ(gathered_rows(), 1);  // the remainder: 3 samples in batches of 2
  ASSERT_EQ(accel_state_free_memory(state), ACCEL_OK);
  EXPECT_EQ(gathered_rows(), 2);
  EXPECT_EQ(accel_state_sync_gradients(state), 1);
  ASSERT_EQ(accel_loader_next(loader, &batch), ACCEL_OK);
  EXPECT_EQ(batch, nullptr);  // the epoch ends as it would have
  ASSERT_EQ(accel_loader_next(loader, &batch), ACCEL_OK);
  EXPECT_NE(batch, nullptr);  // and the next one starts
  accel_batch_free(batch);
  EXPECT_EQ(accel_state_free_memory(nullptr), ACCEL_ERR_NULL_ARGUMENT);
  accel_loader_free(loader);
  accel_options_free(options);
  accel_dataset_free(dataset);
  accel_tensor_free(rows);
}

TEST_F(TrainCapi, SaveModelWritesSafetensorsWithEveryParameter) {
  const std::string directory = tiny_models::temp_file("saved_model");
  ASSERT_EQ(accel_state_save_model(state, model, directory.c_str(), 0), ACCEL_OK) << last_error();
  const std::string path = directory + "/model.safetensors";
  std::FILE* file = std::fopen(path.c_str(), "rb");
  ASSERT_NE(file, nullptr);
  uint64_t header_size = 0;
  ASSERT_EQ(std::fread(&header_size, sizeof header_size, 1, file), 1u);
  std::string header(header_size, '\0');
  ASSERT_EQ(std::fread(&header[0], 1, header_size, file), header_size);
  std::fseek(file, 0, SEEK_END);
  const long size = std::ftell(file);
  std::fclose(file);
  EXPECT_NE(header.find("\"w1\":{\"dtype\":\"F32\",\"shape\":[8,16]"), std::string::npos) << header;
  EXPECT_NE(header.find("\"b2\":{\"dtype\":\"F32\",\"shape\":[4]"), std::string::npos) << header;
  EXPECT_EQ(static_cast<uint64_t>(size), 8 + header_size + (8 * 16 + 16 + 16 * 4 + 4) * 4);
  accel_dataset_t* bad = nullptr;
  EXPECT_EQ(accel_dataset_from_safetensors(&bad, path.c_str()), ACCEL_ERR_INVALID_ARGUMENT);  // it parses; dims differ
  EXPECT_NE(last_error().find("share dim 0"), std::string::npos) << last_error();
  std::remove(path.c_str());
  std::remove(directory.c_str());
}

// accel_model_each_whole_tensor: every parameter and buffer by name, copies the callback owns (a copy: writing
// to it leaves the model as it was); a non-zero return stops the walk with ACCEL_ERR_CALLBACK; keep 0 needs no
// callback; keep other than 0 or 1 and a missing callback are refused.
TEST_F(TrainCapi, EachWholeTensorHandsCopiesByName) {
  struct Seen {
    std::vector<std::string> names;
    std::vector<std::vector<float>> values;
    int stop_after = -1;
  } seen;
  const accel_whole_tensor_fn each = [](const char* name, accel_tensor_t* tensor, void* payload) {
    auto& seen = *static_cast<Seen*>(payload);
    seen.names.push_back(name);
    std::vector<float> values(static_cast<size_t>(accel_tensor_numel(tensor)));
    const int copied = accel_tensor_copy_to_buffer(tensor, values.data(), values.size() * sizeof(float));
    void* data = nullptr;
    if (copied == ACCEL_OK && accel_tensor_data(tensor, &data) == ACCEL_OK) static_cast<float*>(data)[0] += 100.0f;
    seen.values.push_back(values);
    accel_tensor_free(tensor);
    return static_cast<int>(seen.names.size()) == seen.stop_after ? 7 : 0;
  };
  ASSERT_EQ(accel_model_each_whole_tensor(model, 1, each, &seen), ACCEL_OK) << last_error();
  EXPECT_EQ(seen.names, (std::vector<std::string>{"w1", "b1", "w2", "b2"}));
  for (size_t i = 0; i < seen.names.size(); ++i) {
    size_t index = 0;
    while (std::string(accel_model_parameter_name(model, index)) != seen.names[i]) ++index;
    accel_tensor_t* parameter = nullptr;
    ASSERT_EQ(accel_model_parameter(model, index, &parameter), ACCEL_OK);
    std::vector<float> values(static_cast<size_t>(accel_tensor_numel(parameter)));
    ASSERT_EQ(accel_tensor_copy_to_buffer(parameter, values.data(), values.size() * sizeof(float)), ACCEL_OK);
    accel_tensor_free(parameter);
    EXPECT_EQ(values, seen.values[i]) << seen.names[i] << " (or the copy's change reached the model)";
  }
  seen = Seen{};
  seen.stop_after = 2;
  EXPECT_EQ(accel_model_each_whole_tensor(model, 1, each, &seen), ACCEL_ERR_CALLBACK);
  EXPECT_NE(last_error().find("each returned 7 for 'b1'"), std::string::npos) << last_error();
  EXPECT_EQ(seen.names.size(), 2u);
  EXPECT_EQ(accel_model_each_whole_tensor(model, 0, nullptr, nullptr), ACCEL_OK) << last_error();
  EXPECT_EQ(accel_model_each_whole_tensor(model, 1, nullptr, nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_model_each_whole_tensor(model, 2, each, &seen), ACCEL_ERR_INVALID_ARGUMENT);
}

}  // namespace
