// Failure scenarios, run under `accel launch` on 2 processes unless said otherwise. Mode (argv[1]):
//   collective-timeout  rank 1 never joins a gather: rank 0 must get ACCEL_ERR_TIMEOUT within the timeout,
//                       then ACCEL_ERR_INVALID_STATE at once for the next collective.
//   rendezvous-timeout  rank 1 never creates its state: rank 0's accel_state_new must time out.
//   peer-exit           rank 1 exits (code 0) without shutdown: rank 0's gather must fail, not hang.
//   peer-exit-in-backward  rank 1 exits after its forward: rank 0's backward fails, and then its clipping
//                       and optimizer step must fail too and leave the parameters as they were.
//   stall-in-backward   rank 1 sleeps after its forward: rank 0's gradient all-reduce (through shared
//                       memory by default) must time out within the timeout, naming rank 1.
//   Both backward scenarios also run with FAILURE_ZERO_STAGE=2 (the buckets reduce-scattered), with and
//                       without FAILURE_BUCKET_MB=0.0001 (a bucket per parameter).
//   stall-report        (3 processes) rank 2 sleeps instead of joining a gather: ranks 0 and 1 must time
//                       out with a message naming rank 2 and the last collective it started.
//   rendezvous-report   (3 processes) rank 2 never creates its state: ranks 0 and 1 must time out naming it.
//   unresolvable-master (run without the launcher, MASTER_ADDR=no.such.host.invalid) accel_state_new must
//                       fail at once with ACCEL_ERR_ENVIRONMENT naming the address.
// Exit code 0 means the expectation held on that rank.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "accel.h"
#include "tiny_models.hpp"

namespace {

constexpr double kTimeoutS = 3.0;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// *code (when given) receives accel_state_new's result.
accel_state_t* new_state(int* code_out = nullptr) {
  accel_options_t* options = nullptr;
  accel_state_t* state = nullptr;
  if (accel_options_new(&options) != ACCEL_OK || accel_options_set_double(options, "timeout_s", kTimeoutS) != ACCEL_OK) {
    std::fprintf(stderr, "options: %s\n", accel_error_last());
    return nullptr;
  }
  const int code = accel_state_new(&state, options);
  if (code_out != nullptr) *code_out = code;
  accel_options_free(options);
  if (code != ACCEL_OK) std::fprintf(stderr, "accel_state_new: %s: %s\n", accel_error_name(code), accel_error_last());
  return state;
}

int expect(bool condition, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", condition ? "ok" : "FAILED", what.c_str());
  return condition ? 0 : 1;
}

int gather_once(accel_state_t* state, double* elapsed) {
  const float value = 1.0f;
  const int64_t shape[] = {1};
  accel_tensor_t *input = nullptr, *out = nullptr;
  if (accel_tensor_from_buffer(&input, &value, ACCEL_DTYPE_FLOAT32, shape, 1) != ACCEL_OK) return ACCEL_ERR_INTERNAL;
  const auto start = std::chrono::steady_clock::now();
  const int code = accel_state_gather(state, input, &out);
  *elapsed = seconds_since(start);
  accel_tensor_free(out);
  accel_tensor_free(input);
  return code;
}

int collective_timeout(int rank) {
  accel_state_t* state = new_state();
  if (state == nullptr) return 1;
  if (rank == 1) {
    sleep(static_cast<unsigned>(kTimeoutS * 3));
    accel_state_free(state);
    return 0;
  }
  double elapsed = 0;
  int code = gather_once(state, &elapsed);
  std::fprintf(stderr, "rank 0 gather: %s after %.1f s: %s\n", accel_error_name(code), elapsed, accel_error_last());
  int failures = expect(code == ACCEL_ERR_TIMEOUT, "gather times out");
  failures += expect(elapsed < kTimeoutS + 2.0, "within the timeout");
  failures += expect(std::strstr(accel_error_last(), "timed out") != nullptr, "the message says it timed out");
  failures += expect(accel_state_is_broken(state) == 1, "the state reports a broken group");
  code = gather_once(state, &elapsed);
  failures += expect(code == ACCEL_ERR_INVALID_STATE && elapsed < 1.0, "the next collective fails at once");
  accel_state_free(state);
  return failures;
}

int rendezvous_timeout(int rank) {
  if (rank == 1) {
    sleep(static_cast<unsigned>(kTimeoutS * 3));
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  accel_state_t* state = new_state();
  const double elapsed = seconds_since(start);
  int failures = expect(state == nullptr, "accel_state_new fails");
  failures += expect(std::strstr(accel_error_last(), "rendezvous") != nullptr, "the message names the rendezvous");
  failures += expect(elapsed < kTimeoutS + 3.0, "within the timeout");
  accel_state_free(state);
  return failures;
}

int peer_exit(int rank) {
  accel_state_t* state = new_state();
  if (state == nullptr) return 1;
  if (accel_state_wait_for_everyone(state) != ACCEL_OK) return 1;
  if (rank == 1) _exit(0);
  sleep(1);
  double elapsed = 0;
  const int code = gather_once(state, &elapsed);
  std::fprintf(stderr, "rank 0 gather: %s after %.1f s: %s\n", accel_error_name(code), elapsed, accel_error_last());
  int failures = expect(code == ACCEL_ERR_PEER_FAILED, "gather fails with a peer failure");
  failures += expect(elapsed < kTimeoutS + 2.0, "without hanging");
  // Gloo itself says only "Read error [127.0.0.1]:port"; the process that left is named, as the
  // shared-memory path names it.
  const char* message = accel_error_last();
  const char* named = std::strstr(message, "rank 1 (process ");
  failures += expect(named != nullptr && std::strstr(named, ") exited") != nullptr, "the message names rank 1's exit");
  accel_state_free(state);
  return failures;
}

std::vector<float> parameter_values(const accel_model_t* model) {
  std::vector<float> values;
  for (size_t i = 0; i < accel_model_num_parameters(model); ++i) {
    accel_tensor_t* parameter = nullptr;
    if (accel_model_parameter(model, i, &parameter) != ACCEL_OK) return {};
    std::vector<float> these(static_cast<size_t>(accel_tensor_numel(parameter)));
    const int code = accel_tensor_copy_to_buffer(parameter, these.data(), these.size() * sizeof(float));
    accel_tensor_free(parameter);
    if (code != ACCEL_OK) return {};
    values.insert(values.end(), these.begin(), these.end());
  }
  return values;
}

// A prepared MLP, its SGD optimizer and the MSE loss of one forward on this rank's inputs.
struct TrainingStep {
  accel_model_t* model = nullptr;
  accel_optimizer_t* optimizer = nullptr;
  accel_tensor_t* loss = nullptr;
  ~TrainingStep() {
    accel_tensor_free(loss);
    accel_optimizer_free(optimizer);
    accel_model_free(model);
  }
};

// The collective that averages the gradients, as messages name it: stage 2 reduce-scatters the buckets.
const char* gradient_collective() {
  const char* zero_stage = std::getenv("FAILURE_ZERO_STAGE");
  return zero_stage != nullptr && std::string(zero_stage) == "2" ? "ZeRO gradient reduce-scatter" : "DDP gradient all-reduce";
}

// The model prepared with zero_stage FAILURE_ZERO_STAGE when that is set (the ZeRO variants of the
// backward scenarios: stage 2 reduce-scatters the buckets instead of all-reducing them), and with buckets of
// FAILURE_BUCKET_MB (one parameter each when tiny: stage 2 then waits for older buckets inside backward).
bool set_up(accel_state_t* state, TrainingStep& step) {
  const std::string path = tiny_models::mlp(tiny_models::temp_file("peer_exit_in_backward.pt"));
  const char* zero_stage = std::getenv("FAILURE_ZERO_STAGE");
  const char* bucket_mb = std::getenv("FAILURE_BUCKET_MB");
  accel_options_t* options = nullptr;
  bool ok = accel_options_new(&options) == ACCEL_OK &&
            (zero_stage == nullptr || accel_options_set(options, "zero_stage", zero_stage) == ACCEL_OK) &&
            (bucket_mb == nullptr || (accel_options_set(options, "bucket_cap_mb", bucket_mb) == ACCEL_OK &&
                                      accel_options_set(options, "first_bucket_mb", bucket_mb) == ACCEL_OK)) &&
            accel_model_load(&step.model, path.c_str()) == ACCEL_OK &&
            accel_state_prepare_model(state, step.model, options) == ACCEL_OK &&
            accel_optimizer_new(&step.optimizer, step.model, "sgd", nullptr) == ACCEL_OK;
  accel_options_free(options);
  if (!ok) std::fprintf(stderr, "set-up: %s\n", accel_error_last());
  return ok;
}

bool forward(accel_state_t* state, int rank, TrainingStep& step) {
  accel_tensor_free(step.loss);
  step.loss = nullptr;
  if (accel_state_accumulate(state) != ACCEL_OK) return false;
  const std::vector<float> x(4 * 8, static_cast<float>(rank + 1)), y(4 * 4, 0.0f);
  const int64_t x_shape[] = {4, 8}, y_shape[] = {4, 4};
  accel_tensor_t *input = nullptr, *target = nullptr, *prediction = nullptr;
  accel_output_t* output = nullptr;
  bool ok = accel_tensor_from_buffer(&input, x.data(), ACCEL_DTYPE_FLOAT32, x_shape, 2) == ACCEL_OK &&
            accel_tensor_from_buffer(&target, y.data(), ACCEL_DTYPE_FLOAT32, y_shape, 2) == ACCEL_OK &&
            accel_model_forward(step.model, &input, 1, nullptr, nullptr, 0, &output) == ACCEL_OK &&
            accel_output_get(output, 0, &prediction) == ACCEL_OK &&
            accel_loss_compute(&step.loss, "mse", prediction, target, nullptr) == ACCEL_OK;
  if (!ok) std::fprintf(stderr, "forward: %s\n", accel_error_last());
  accel_tensor_free(prediction);
  accel_output_free(output);
  accel_tensor_free(target);
  accel_tensor_free(input);
  return ok;
}

int peer_exit_in_backward(int rank) {
  accel_state_t* state = new_state();
  if (state == nullptr) return 1;
  TrainingStep step;
  if (!set_up(state, step) || !forward(state, rank, step)) return 1;
  // Gone before its share of the gradient all-reduce: rank 0's gradients can never be averaged.
  if (rank == 1) _exit(0);
  int code = accel_state_backward(state, step.loss);
  std::fprintf(stderr, "rank 0 backward: %s: %s\n", accel_error_name(code), accel_error_last());
  int failures = expect(code == ACCEL_ERR_PEER_FAILED || code == ACCEL_ERR_TIMEOUT, "backward fails");
  const std::vector<float> before = parameter_values(step.model);
  code = accel_state_clip_grad_norm(state, step.model, 1.0, 2.0, nullptr);
  failures += expect(code == ACCEL_ERR_INVALID_STATE, "clip_grad_norm is refused");
  code = accel_state_clip_grad_value(state, step.model, 1.0);
  failures += expect(code == ACCEL_ERR_INVALID_STATE, "clip_grad_value is refused");
  code = accel_optimizer_step(step.optimizer);
  std::fprintf(stderr, "rank 0 optimizer step: %s: %s\n", accel_error_name(code), accel_error_last());
  failures += expect(code == ACCEL_ERR_INVALID_STATE, "the optimizer step is refused");
  failures += expect(std::strstr(accel_error_last(), gradient_collective()) != nullptr,
                     "the message names the failure that broke the group");
  failures += expect(!before.empty() && parameter_values(step.model) == before, "the parameters are unchanged");
  code = forward(state, rank, step) ? accel_state_backward(state, step.loss) : ACCEL_ERR_INTERNAL;
  std::fprintf(stderr, "rank 0 second backward: %s: %s\n", accel_error_name(code), accel_error_last());
  failures += expect(code == ACCEL_ERR_INVALID_STATE, "the next backward fails at once");
  failures += expect(accel_optimizer_step(step.optimizer) == ACCEL_ERR_INVALID_STATE, "so does the next step");
  failures += expect(parameter_values(step.model) == before, "the parameters are still unchanged");
  accel_state_free(state);
  return failures;
}

int stall_in_backward(int rank) {
  accel_state_t* state = new_state();
  if (state == nullptr) return 1;
  TrainingStep step;
  if (!set_up(state, step) || !forward(state, rank, step)) return 1;
  if (rank == 1) {
    sleep(static_cast<unsigned>(kTimeoutS * 3));
    _exit(0);
  }
  const auto start = std::chrono::steady_clock::now();
  const int code = accel_state_backward(state, step.loss);
  const double elapsed = seconds_since(start);
  std::fprintf(stderr, "rank 0 backward: %s after %.1f s: %s\n", accel_error_name(code), elapsed, accel_error_last());
  const std::string message = accel_error_last();
  int failures = expect(code == ACCEL_ERR_TIMEOUT, "backward times out");
  failures += expect(elapsed < kTimeoutS + 2.0, "within the timeout");
  failures += expect(message.find(std::string(gradient_collective()) + " on rank 0: timed out") != std::string::npos,
                     "the message names the gradient collective");
  failures += expect(message.find("rank 1 did not join") != std::string::npos, "the message names rank 1");
  failures += expect(accel_state_is_broken(state) == 1, "the state reports a broken group");
  accel_state_free(state);
  return failures;
}

// Ranks 0 and 1 time out in a gather that rank 2 never joins; rank 0 serves the store their reports read.
int stall_report(int rank) {
  accel_state_t* state = new_state();
  if (state == nullptr) return 1;
  if (accel_state_wait_for_everyone(state) != ACCEL_OK) return 1;
  if (rank == 2) {
    sleep(static_cast<unsigned>(kTimeoutS + 3));
    accel_state_free(state);
    return 0;
  }
  double elapsed = 0;
  const int code = gather_once(state, &elapsed);
  std::fprintf(stderr, "rank %d gather: %s after %.1f s: %s\n", rank, accel_error_name(code), elapsed, accel_error_last());
  const std::string message = accel_error_last();
  int failures = expect(code == ACCEL_ERR_TIMEOUT, "gather times out");
  failures += expect(elapsed < kTimeoutS + 5.0, "within the timeout and the report");
  failures += expect(message.find("rank 2 did not join collective #2 gather") != std::string::npos,
                     "the message names the rank that did not join");
  failures += expect(message.find("rank 2: has not joined; the last collective it started is #1 wait_for_everyone") !=
                         std::string::npos,
                     "the message says what rank 2 last did");
  // Keeps the store up while rank 1 reads it.
  if (rank == 0) sleep(2);
  accel_state_free(state);
  return failures;
}

int rendezvous_report(int rank) {
  if (rank == 2) {
    sleep(static_cast<unsigned>(kTimeoutS * 2));
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  accel_state_t* state = new_state();
  const double elapsed = seconds_since(start);
  std::fprintf(stderr, "rank %d accel_state_new after %.1f s: %s\n", rank, elapsed, accel_error_last());
  int failures = expect(state == nullptr, "accel_state_new fails");
  failures += expect(std::strstr(accel_error_last(), "rank 2 never reached the rendezvous (ranks 0, 1 did)") != nullptr,
                     "the message names the missing rank");
  failures += expect(elapsed < kTimeoutS + 3.0, "within the timeout");
  accel_state_free(state);
  return failures;
}

int unresolvable_master() {
  const auto start = std::chrono::steady_clock::now();
  int code = ACCEL_OK;
  accel_state_t* state = new_state(&code);
  const double elapsed = seconds_since(start);
  std::fprintf(stderr, "accel_state_new after %.2f s\n", elapsed);
  int failures = expect(state == nullptr && code == ACCEL_ERR_ENVIRONMENT, "accel_state_new fails: ACCEL_ERR_ENVIRONMENT");
  failures += expect(std::strstr(accel_error_last(), "'no.such.host.invalid'") != nullptr, "the message names the address");
  failures += expect(elapsed < kTimeoutS / 2, "at once, not after the timeout");
  accel_state_free(state);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank_text = std::getenv("RANK");
  const int rank = rank_text ? std::atoi(rank_text) : 0;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "collective-timeout") return collective_timeout(rank);
  if (mode == "rendezvous-timeout") return rendezvous_timeout(rank);
  if (mode == "peer-exit") return peer_exit(rank);
  if (mode == "peer-exit-in-backward") return peer_exit_in_backward(rank);
  if (mode == "stall-in-backward") return stall_in_backward(rank);
  if (mode == "stall-report") return stall_report(rank);
  if (mode == "rendezvous-report") return rendezvous_report(rank);
  if (mode == "unresolvable-master") return unresolvable_master();
  std::fprintf(stderr,
               "usage: failure_worker collective-timeout|rendezvous-timeout|peer-exit|peer-exit-in-backward|"
               "stall-report|rendezvous-report|unresolvable-master\n");
  return 2;
}
