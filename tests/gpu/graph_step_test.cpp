// accel_train_step with cuda_graph on a GPU: warm-up, one capture, replays; the weights against the loop of
// separate calls and against the same step never captured; an fp16 overflow skipped inside the graph; the
// reasons a step runs eagerly; a checkpoint of captured steps resumed captured and eagerly; a replay as one
// span of the timeline; and no host synchronisation in a replayed step (counted with LibTorch's CUDA sync
// debug mode). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "accel.h"
#include "core/files.hpp"
#include "cuda_present.hpp"
#include "tiny_models.hpp"

#ifdef ACCEL_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#endif

namespace {

std::string last_error() { return accel_error_last(); }

constexpr int64_t kRows = 16;
constexpr int kBatches = 5;

// Batch b of kRows rows: 8 features in (-1, 1), and classes 0..3.
std::vector<float> features(int b, int64_t rows = kRows) {
  std::vector<float> values;
  for (int64_t i = 0; i < rows * 8; ++i) values.push_back(std::sin(0.37f * static_cast<float>(i) + 1.1f * static_cast<float>(b)));
  return values;
}
std::vector<int64_t> labels(int b, int64_t rows = kRows) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < rows; ++i) values.push_back((i * 7 + b) % 4);
  return values;
}

using Weights = std::vector<std::vector<float>>;

// The largest difference between two sets of weights, in units of the last place of each tensor's largest
// magnitude (rounding differences add up over steps in these units).
double gap_in_ulps(const Weights& a, const Weights& b) {
  double worst = 0;
  for (size_t t = 0; t < a.size() && t < b.size(); ++t) {
    float magnitude = 0;
    for (const float v : a[t]) magnitude = std::max(magnitude, std::fabs(v));
    const double unit = std::ldexp(1.0, std::ilogb(magnitude) - 23);
    for (size_t i = 0; i < a[t].size() && i < b[t].size(); ++i) {
      worst = std::max(worst, std::fabs(double(a[t][i]) - double(b[t][i])) / unit);
    }
  }
  return worst;
}

// One process has one state: each run makes its own and frees it, so runs never share an optimizer count
// or an accumulation counter.
struct GraphRun {
  accel_state_t* state = nullptr;
  accel_model_t* model = nullptr;
  accel_optimizer_t* optimizer = nullptr;
  accel_scheduler_t* scheduler = nullptr;
  accel_train_step_t* step = nullptr;
  std::vector<std::pair<accel_tensor_t*, accel_tensor_t*>> batches;  // on the device

  struct Settings {
    std::string mixed_precision = "no";
    std::string kind = "sgd";
    std::string model = "mlp";
    int64_t accumulation = 1;
    bool scheduler = false;
    std::string timeline;
    std::vector<std::pair<std::string, std::string>> step_options;
  };

  explicit GraphRun(const Settings& settings) {
    accel_options_t* options = nullptr;
    EXPECT_EQ(accel_options_new(&options), ACCEL_OK);
    EXPECT_EQ(accel_options_set_string(options, "mixed_precision", settings.mixed_precision.c_str()), ACCEL_OK);
    EXPECT_EQ(accel_options_set_int(options, "gradient_accumulation_steps", settings.accumulation), ACCEL_OK);
    if (!settings.timeline.empty()) EXPECT_EQ(accel_options_set_string(options, "timeline", settings.timeline.c_str()), ACCEL_OK);
    EXPECT_EQ(accel_state_new(&state, options), ACCEL_OK) << last_error();
    accel_options_free(options);
    const auto path = tiny_models::temp_file("graph_" + settings.model + ".pt");
    if (settings.model == "branching") {
      tiny_models::branching(path);
    } else {
      tiny_models::mlp(path);
    }
    EXPECT_EQ(accel_model_load(&model, path.c_str()), ACCEL_OK) << last_error();
    std::remove(path.c_str());
    EXPECT_EQ(accel_state_prepare_model(state, model, nullptr), ACCEL_OK) << last_error();
    accel_options_t* optimizer_options = nullptr;
    EXPECT_EQ(accel_options_new(&optimizer_options), ACCEL_OK);
    EXPECT_EQ(accel_options_set_double(optimizer_options, "lr", settings.kind == "sgd" ? 0.05 : 1e-2), ACCEL_OK);
    EXPECT_EQ(accel_options_set_double(optimizer_options, "weight_decay", 0.01), ACCEL_OK);
    if (settings.kind == "sgd") EXPECT_EQ(accel_options_set_double(optimizer_options, "momentum", 0.9), ACCEL_OK);
    EXPECT_EQ(accel_optimizer_new(&optimizer, model, settings.kind.c_str(), optimizer_options), ACCEL_OK) << last_error();
    accel_options_free(optimizer_options);
    if (settings.scheduler) {
      accel_options_t* schedule = nullptr;
      EXPECT_EQ(accel_options_new(&schedule), ACCEL_OK);
      EXPECT_EQ(accel_options_set_int(schedule, "warmup_steps", 10), ACCEL_OK);
      EXPECT_EQ(accel_options_set_int(schedule, "total_steps", 200), ACCEL_OK);
      EXPECT_EQ(accel_scheduler_new(&scheduler, optimizer, "cosine", schedule), ACCEL_OK) << last_error();
      accel_options_free(schedule);
    }
    accel_options_t* step_options = nullptr;
    EXPECT_EQ(accel_options_new(&step_options), ACCEL_OK);
    for (const auto& [key, value] : settings.step_options) {
      EXPECT_EQ(accel_options_set(step_options, key.c_str(), value.c_str()), ACCEL_OK) << key << ": " << last_error();
    }
    EXPECT_EQ(accel_train_step_new(&step, model, optimizer, step_options), ACCEL_OK) << last_error();
    accel_options_free(step_options);
    for (int b = 0; b < kBatches; ++b) batches.push_back(batch(features(b), labels(b), kRows));
  }

  ~GraphRun() {
    for (auto& [x, y] : batches) {
      accel_tensor_free(x);
      accel_tensor_free(y);
    }
    accel_train_step_free(step);
    accel_scheduler_free(scheduler);
    accel_optimizer_free(optimizer);
    accel_model_free(model);
    accel_state_free(state);
  }

  // A batch sent to the device (send_to_device records the classes' range: no read-back to check them).
  std::pair<accel_tensor_t*, accel_tensor_t*> batch(const std::vector<float>& x_values, const std::vector<int64_t>& y_values,
                                                    int64_t rows) {
    const int64_t x_shape[] = {rows, 8}, y_shape[] = {rows};
    accel_tensor_t *x_host = nullptr, *y_host = nullptr, *x = nullptr, *y = nullptr;
    EXPECT_EQ(accel_tensor_from_buffer(&x_host, x_values.data(), ACCEL_DTYPE_FLOAT32, x_shape, 2), ACCEL_OK);
    EXPECT_EQ(accel_tensor_from_buffer(&y_host, y_values.data(), ACCEL_DTYPE_INT64, y_shape, 1), ACCEL_OK);
    EXPECT_EQ(accel_state_send_to_device(state, x_host, 0, &x), ACCEL_OK) << last_error();
    EXPECT_EQ(accel_state_send_to_device(state, y_host, 0, &y), ACCEL_OK) << last_error();
    accel_tensor_free(x_host);
    accel_tensor_free(y_host);
    return {x, y};
  }

  // One accel_train_step_run; the loss handle is returned (NULL on failure).
  accel_tensor_t* step_on(std::pair<accel_tensor_t*, accel_tensor_t*> xy) {
    accel_tensor_t* loss = nullptr;
    EXPECT_EQ(accel_train_step_run(step, &xy.first, 1, nullptr, nullptr, 0, xy.second, &loss), ACCEL_OK) << last_error();
    if (scheduler != nullptr) EXPECT_EQ(accel_scheduler_step(scheduler), ACCEL_OK) << last_error();
    return loss;
  }

  void steps(int count, int first = 0) {
    for (int i = first; i < first + count; ++i) accel_tensor_free(step_on(batches[static_cast<size_t>(i % kBatches)]));
  }

  // The loop of separate calls, as an Accelerate user writes it (the reference of an eager step).
  void manual_steps(int count) {
    for (int i = 0; i < count; ++i) {
      auto [x, y] = batches[static_cast<size_t>(i % kBatches)];
      EXPECT_EQ(accel_state_accumulate(state), ACCEL_OK);
      accel_output_t* output = nullptr;
      EXPECT_EQ(accel_model_forward(model, &x, 1, nullptr, nullptr, 0, &output), ACCEL_OK) << last_error();
      accel_tensor_t *logits = nullptr, *loss = nullptr;
      EXPECT_EQ(accel_output_get(output, 0, &logits), ACCEL_OK);
      EXPECT_EQ(accel_loss_compute(&loss, "cross_entropy", logits, y, nullptr), ACCEL_OK) << last_error();
      EXPECT_EQ(accel_state_backward(state, loss), ACCEL_OK) << last_error();
      EXPECT_EQ(accel_state_clip_grad_norm(state, model, 1.0, 2.0, nullptr), ACCEL_OK) << last_error();
      EXPECT_EQ(accel_optimizer_step(optimizer), ACCEL_OK) << last_error();
      if (scheduler != nullptr) EXPECT_EQ(accel_scheduler_step(scheduler), ACCEL_OK) << last_error();
      EXPECT_EQ(accel_optimizer_zero_grad(optimizer), ACCEL_OK);
      accel_tensor_free(loss);
      accel_tensor_free(logits);
      accel_output_free(output);
    }
  }

  Weights weights() const {
    Weights all;
    for (size_t i = 0; i < accel_model_num_parameters(model); ++i) {
      accel_tensor_t* parameter = nullptr;
      EXPECT_EQ(accel_model_parameter(model, i, &parameter), ACCEL_OK);
      std::vector<float> values(static_cast<size_t>(accel_tensor_numel(parameter)));
      EXPECT_EQ(accel_tensor_copy_to_buffer(parameter, values.data(), values.size() * sizeof(float)), ACCEL_OK);
      all.push_back(values);
      accel_tensor_free(parameter);
    }
    return all;
  }

  double stat(const char* name) const {
    double value = -1;
    EXPECT_EQ(accel_train_step_stat(step, name, &value), ACCEL_OK) << last_error();
    return value;
  }
  std::string reason() const { return accel_train_step_eager_reason(step); }
};

GraphRun::Settings graph(const std::string& kind, int64_t warmup = 3) {
  GraphRun::Settings settings;
  settings.kind = kind;
  settings.step_options = {{"cuda_graph", "true"}, {"cuda_graph_warmup", std::to_string(warmup)}, {"max_grad_norm", "1.0"}};
  return settings;
}

constexpr int kSteps = 100;

// 100 steps: 3 warm-ups, one capture, 96 more replays. The weights are those of the same steps never captured
// (warm-up longer than the run) bit for bit, and those of the loop of separate calls to rounding: the
// captured optimizer rounds lr * d once more per step (capturable_optimizer.hpp).
TEST(GpuGraphStep, CapturedStepsGiveTheEagerWeights) {
  SKIP_WITHOUT_CUDA();
  for (const bool with_scheduler : {false, true}) {
    for (const std::string kind : {"sgd", "adamw"}) {
      SCOPED_TRACE(kind + (with_scheduler ? " with a cosine schedule" : ""));
      Weights manual, never_captured, captured;
      {
        GraphRun::Settings settings = graph(kind);
        settings.scheduler = with_scheduler;
        GraphRun run(settings);
        run.manual_steps(kSteps);
        manual = run.weights();
      }
      {
        GraphRun::Settings settings = graph(kind, 1000);
        settings.scheduler = with_scheduler;
        GraphRun run(settings);
        run.steps(kSteps);
        EXPECT_EQ(run.stat("captures"), 0);
        never_captured = run.weights();
      }
      GraphRun::Settings settings = graph(kind);
      settings.scheduler = with_scheduler;
      GraphRun run(settings);
      const auto initial = run.weights();
      run.steps(kSteps);
      EXPECT_EQ(run.stat("warmup_steps"), 3);
      EXPECT_EQ(run.stat("captures"), 1) << run.reason();
      EXPECT_EQ(run.stat("replays"), kSteps - 3);
      EXPECT_EQ(run.stat("eager_steps"), 0);
      EXPECT_EQ(run.reason(), "");
      captured = run.weights();
      EXPECT_EQ(captured, never_captured) << "a replay computes what the same step computes eagerly";
      const double gap = gap_in_ulps(captured, manual);
      std::printf("[ figure ] %s%s: captured vs the loop of separate calls after %d steps: %.1f ulps\n", kind.c_str(),
                  with_scheduler ? " + cosine" : "", kSteps, gap);
      EXPECT_LE(gap, 4.0 * kSteps);
      EXPECT_GT(gap_in_ulps(captured, initial), 1000.0) << "the steps trained";
    }
  }
}

// fp16: a batch beyond fp16's range overflows every gradient; the captured step skips the optimizer step
// on the device (the weights stay bit for bit), halves the scale, and clean replays go on.
TEST(GpuGraphStep, Fp16OverflowSkipsTheStepInsideTheGraph) {
  SKIP_WITHOUT_CUDA();
  GraphRun::Settings settings = graph("adamw");
  settings.mixed_precision = "fp16";
  GraphRun run(settings);
  run.steps(6);
  ASSERT_EQ(run.stat("captures"), 1) << run.reason();
  double scale = 0;
  ASSERT_EQ(accel_optimizer_loss_scale(run.optimizer, &scale), ACCEL_OK);
  EXPECT_EQ(scale, 65536.0);
  const auto before = run.weights();
  auto overflow = run.batch(std::vector<float>(kRows * 8, 1e5f), labels(0), kRows);
  accel_tensor_free(run.step_on(overflow));
  EXPECT_EQ(run.stat("replays"), 4) << "the overflow batch replayed: " << run.reason();
  EXPECT_EQ(accel_optimizer_step_was_skipped(run.optimizer), 1);
  EXPECT_EQ(run.weights(), before);
  ASSERT_EQ(accel_optimizer_loss_scale(run.optimizer, &scale), ACCEL_OK);
  EXPECT_EQ(scale, 32768.0);
  run.steps(2);
  EXPECT_EQ(accel_optimizer_step_was_skipped(run.optimizer), 0);
  EXPECT_NE(run.weights(), before);
  accel_tensor_free(overflow.first);
  accel_tensor_free(overflow.second);
}

// The reasons a step runs eagerly, each in the step's reason, and what happens after.
TEST(GpuGraphStep, StepsThatCannotReplayRunEagerlyAndSayWhy) {
  SKIP_WITHOUT_CUDA();
  {
    GraphRun run(graph("sgd"));
    run.steps(5);
    ASSERT_EQ(run.stat("captures"), 1) << run.reason();
    // An uneven last batch: eager, then the captured layout replays again.
    auto last = run.batch(features(9, 5), labels(9, 5), 5);
    accel_tensor_free(run.step_on(last));
    EXPECT_NE(run.reason().find("differs from the captured one"), std::string::npos) << run.reason();
    EXPECT_EQ(run.stat("eager_steps"), 1);
    run.steps(1);
    EXPECT_EQ(run.reason(), "");
    EXPECT_EQ(run.stat("replays"), 3);
    // A layout that lasts (warm-up + 1 steps in a row) gets the graph.
    for (int i = 0; i < 4; ++i) accel_tensor_free(run.step_on(last));
    EXPECT_EQ(run.stat("captures"), 2) << run.reason();
    EXPECT_EQ(run.reason(), "");
    accel_tensor_free(last.first);
    accel_tensor_free(last.second);
  }
  {
    GraphRun::Settings settings = graph("sgd");
    settings.model = "branching";
    GraphRun run(settings);
    run.steps(8);
    EXPECT_EQ(run.stat("captures"), 0);
    EXPECT_NE(run.reason().find("cannot be captured"), std::string::npos) << run.reason();
    EXPECT_EQ(run.stat("eager_steps"), 5) << "the failed capture's step and the later ones";
  }
  {
    GraphRun::Settings settings = graph("sgd");
    settings.accumulation = 2;
    GraphRun run(settings);
    run.steps(4);
    EXPECT_NE(run.reason().find("gradient_accumulation_steps is 2"), std::string::npos) << run.reason();
    EXPECT_EQ(run.stat("eager_steps"), 4);
  }
  {
    GraphRun run(graph("sgd"));
    accel_optimizer_t* second = nullptr;
    ASSERT_EQ(accel_optimizer_new(&second, run.model, "sgd", nullptr), ACCEL_OK) << last_error();
    run.steps(5);
    EXPECT_NE(run.reason().find("2 optimizers"), std::string::npos) << run.reason();
    EXPECT_EQ(run.stat("captures"), 0);
    accel_optimizer_free(second);
    run.steps(5);
    EXPECT_EQ(run.stat("captures"), 1) << run.reason();
  }
}

// A checkpoint of captured steps (AdamW: its step counts live on the device) resumes to the weights of a run
// that never stopped: captured, bit for bit; eagerly, to rounding.
TEST(GpuGraphStep, ACheckpointOfCapturedStepsResumes) {
  SKIP_WITHOUT_CUDA();
  const auto directory = tiny_models::temp_file("graph_checkpoint");
  Weights uninterrupted;
  {
    GraphRun run(graph("adamw"));
    run.steps(30);
    uninterrupted = run.weights();
  }
  {
    GraphRun run(graph("adamw"));
    run.steps(15);
    ASSERT_EQ(run.stat("captures"), 1);
    ASSERT_EQ(accel_state_save_state(run.state, directory.c_str(), &run.model, 1, &run.optimizer, 1, nullptr, 0, nullptr, 0),
              ACCEL_OK)
        << last_error();
  }
  for (const bool captured : {true, false}) {
    SCOPED_TRACE(captured ? "resumed captured" : "resumed eagerly");
    GraphRun::Settings settings = graph("adamw");
    if (!captured) settings.step_options = {{"max_grad_norm", "1.0"}};
    GraphRun run(settings);
    ASSERT_EQ(accel_state_load_state(run.state, directory.c_str(), &run.model, 1, &run.optimizer, 1, nullptr, 0, nullptr, 0),
              ACCEL_OK)
        << last_error();
    run.steps(15, 15);
    if (captured) {
      EXPECT_EQ(run.stat("captures"), 1) << run.reason();
      EXPECT_EQ(run.weights(), uninterrupted);
    } else {
      EXPECT_LE(gap_in_ulps(run.weights(), uninterrupted), 4.0 * 15);
    }
  }
  accel::remove_all(directory);
}

// With the timeline on, each replay is one span ("train step (CUDA graph replay)"), without the forward,
// backward and optimizer spans of an eager step.
TEST(GpuGraphStep, TheTimelineShowsAReplayAsOneSpan) {
  SKIP_WITHOUT_CUDA();
  const auto directory = tiny_models::temp_file("graph_timeline");
  {
    GraphRun::Settings settings = graph("sgd");
    settings.timeline = directory;
    GraphRun run(settings);
    run.steps(12);
    ASSERT_EQ(run.stat("replays"), 9);
  }
  std::ifstream file(directory + "/timeline.rank0.json");
  ASSERT_TRUE(file.good()) << "no trace in " << directory;
  std::stringstream text;
  text << file.rdbuf();
  const std::string trace = text.str();
  auto count = [&](const std::string& name) {
    size_t found = 0;
    for (size_t at = trace.find("\"" + name + "\""); at != std::string::npos; at = trace.find("\"" + name + "\"", at + 1)) ++found;
    return found;
  };
  EXPECT_EQ(count("train step (CUDA graph replay)"), 9u);
  EXPECT_EQ(count("forward"), 4u) << "3 warm-ups and the capture";
  accel::remove_all(directory);
}

#ifdef ACCEL_WITH_CUDA
// Counts LibTorch's "called a synchronizing CUDA operation" warnings while it lives.
class SyncCounter : public c10::WarningHandler {
 public:
  SyncCounter() : previous_mode_(c10::cuda::warning_state().get_sync_debug_mode()), guard_(this) {
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
  }
  ~SyncCounter() override { c10::cuda::warning_state().set_sync_debug_mode(previous_mode_); }
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("synchroniz") != std::string::npos) ++count;
  }
  int count = 0;

 private:
  c10::cuda::SyncDebugMode previous_mode_;
  c10::WarningUtils::WarningHandlerGuard guard_;
};
#endif

// No replayed step waits for the GPU: LibTorch's sync debug mode reports no synchronising call over 20 of
// them (with a scheduler changing the lr every step); reading a loss back is one, which it does report.
TEST(GpuGraphStep, AReplayedStepDoesNotSynchronise) {
  SKIP_WITHOUT_CUDA();
#ifdef ACCEL_WITH_CUDA
  GraphRun::Settings settings = graph("adamw");
  settings.scheduler = true;
  GraphRun run(settings);
  run.steps(5);
  ASSERT_EQ(run.stat("captures"), 1) << run.reason();
  accel_tensor_t* loss = nullptr;
  {
    SyncCounter counter;
    for (int i = 0; i < 20; ++i) {
      accel_tensor_free(loss);
      loss = run.step_on(run.batches[static_cast<size_t>(i % kBatches)]);
    }
    EXPECT_EQ(counter.count, 0);
    float value = 0;
    EXPECT_EQ(accel_tensor_copy_to_buffer(loss, &value, sizeof value), ACCEL_OK);
    EXPECT_GE(counter.count, 1) << "the counter must see the read-back";
    EXPECT_TRUE(std::isfinite(value));
  }
  EXPECT_EQ(run.stat("replays"), 22);
  accel_tensor_free(loss);
#else
  GTEST_SKIP() << "this build has no CUDA";
#endif
}

}  // namespace
