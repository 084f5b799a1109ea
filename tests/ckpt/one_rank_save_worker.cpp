// Upstream's pitfall, save_state under `if accelerator.is_main_process:`, on 2 processes under `accel
// launch` with the default timeout (30 minutes): rank 0 calls a collective checkpoint operation that rank 1
// never calls, and both must fail within kLimitS with a message that names the operation and the other
// rank, never hang. Mode (argv[1]):
//   save-vs-step     rank 0 saves while rank 1 runs a training step (its gradient all-reduce)
//   save-vs-barrier  rank 0 saves while rank 1 waits for everyone, 3 s later
//   load-vs-barrier  both save, then rank 0 loads while rank 1 waits for everyone
//   different-folders  both save, then load, each into a folder of its own (a per-process temporary folder):
//                    both fail at once with ACCEL_ERR_INVALID_ARGUMENT naming both folders, nothing is
//                    written, and the group stays usable
// Against a training step the two are out of step inside the backend: afterwards the state reports the
// group broken, the next collective fails at once, and freeing every handle returns (a collective abandoned
// by the other rank must not hold the process). Against a barrier the two meet in the call agreement
// (distributed/call_agreement.hpp): both fail at once naming each process's call, nothing else was sent, and
// the group stays usable (the next barrier of both goes through). Exit code 0 means the expectations held
// on that rank.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "accel.h"
#include "core/files.hpp"
#include "temp_dir.hpp"
#include "tiny_models.hpp"

namespace {

// Far below the timeout: what the test proves is that nobody waits it out.
constexpr double kLimitS = 20.0;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int expect(bool condition, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", condition ? "ok" : "FAILED", what.c_str());
  return condition ? 0 : 1;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Training {
  accel_state_t* state = nullptr;
  accel_model_t* model = nullptr;
  accel_optimizer_t* optimizer = nullptr;
  ~Training() {
    accel_optimizer_free(optimizer);
    accel_model_free(model);
    accel_state_free(state);
  }
};

// Buckets of about 200 bytes: each of the MLP's 4 parameters has its own, so rank 1 has started all 4
// all-reduces when it waits for the first, and its latest record is ahead of the collective it waits on.
bool set_up(Training& training) {
  const std::string path = tiny_models::mlp(tiny_models::temp_file("one_rank_save.pt"));
  accel_options_t* buckets = nullptr;
  const bool ok = accel_state_new(&training.state, nullptr) == ACCEL_OK &&
                  accel_model_load(&training.model, path.c_str()) == ACCEL_OK &&
                  accel_options_new(&buckets) == ACCEL_OK &&
                  accel_options_set_double(buckets, "bucket_cap_mb", 0.0002) == ACCEL_OK &&
                  accel_options_set_double(buckets, "first_bucket_mb", 0.0002) == ACCEL_OK &&
                  accel_state_prepare_model(training.state, training.model, buckets) == ACCEL_OK &&
                  accel_optimizer_new(&training.optimizer, training.model, "sgd", nullptr) == ACCEL_OK;
  if (!ok) std::fprintf(stderr, "set-up: %s\n", accel_error_last());
  accel_options_free(buckets);
  return ok;
}

// A forward and the backward whose gradient all-reduce meets the other ranks.
int training_step(Training& training, int rank) {
  const std::vector<float> x(4 * 8, static_cast<float>(rank + 1)), y(4 * 4, 0.0f);
  const int64_t x_shape[] = {4, 8}, y_shape[] = {4, 4};
  accel_tensor_t *input = nullptr, *target = nullptr, *prediction = nullptr, *loss = nullptr;
  accel_output_t* output = nullptr;
  const bool ok = accel_state_accumulate(training.state) == ACCEL_OK &&
                  accel_tensor_from_buffer(&input, x.data(), ACCEL_DTYPE_FLOAT32, x_shape, 2) == ACCEL_OK &&
                  accel_tensor_from_buffer(&target, y.data(), ACCEL_DTYPE_FLOAT32, y_shape, 2) == ACCEL_OK &&
                  accel_model_forward(training.model, &input, 1, nullptr, nullptr, 0, &output) == ACCEL_OK &&
                  accel_output_get(output, 0, &prediction) == ACCEL_OK &&
                  accel_loss_compute(&loss, "mse", prediction, target, nullptr) == ACCEL_OK;
  const int code = ok ? accel_state_backward(training.state, loss) : ACCEL_ERR_INTERNAL;
  if (!ok) std::fprintf(stderr, "forward: %s\n", accel_error_last());
  accel_tensor_free(loss);
  accel_tensor_free(prediction);
  accel_output_free(output);
  accel_tensor_free(target);
  accel_tensor_free(input);
  return code;
}

int checkpoint(Training& training, bool load, const std::string& directory) {
  accel_model_t* models[] = {training.model};
  accel_optimizer_t* optimizers[] = {training.optimizer};
  return load ? accel_state_load_state(training.state, directory.c_str(), models, 1, optimizers, 1, nullptr, 0, nullptr, 0)
              : accel_state_save_state(training.state, directory.c_str(), models, 1, optimizers, 1, nullptr, 0, nullptr, 0);
}

// What both ranks must see once the one-sided call failed; `broken`: whether the group is then.
int expect_failed_fast(Training& training, int rank, const char* call, int code, double elapsed,
                       const std::vector<std::string>& named, bool broken) {
  const std::string message = accel_error_last();
  std::fprintf(stderr, "rank %d %s: %s after %.1f s: %s\n", rank, call, accel_error_name(code), elapsed, message.c_str());
  int failures = expect(code == ACCEL_ERR_INVALID_STATE, std::string(call) + " fails with ACCEL_ERR_INVALID_STATE");
  failures += expect(elapsed < kLimitS, std::string(call) + " fails within " + std::to_string(kLimitS) + " s");
  failures += expect(contains(message, "collectives out of step"), "the message says the collectives are out of step");
  for (const std::string& part : named) failures += expect(contains(message, part), "the message names '" + part + "'");
  if (!broken) {
    failures += expect(accel_state_is_broken(training.state) == 0, "the group is not broken");
    failures += expect(accel_state_wait_for_everyone(training.state) == ACCEL_OK, "the next barrier goes through");
    return failures;
  }
  failures += expect(accel_state_is_broken(training.state) == 1, "the state reports a broken group");
  const auto start = std::chrono::steady_clock::now();
  const int next = accel_state_wait_for_everyone(training.state);
  failures += expect(next == ACCEL_ERR_INVALID_STATE && seconds_since(start) < 1.0, "the next collective fails at once");
  return failures;
}

int run_different_folders(Training& training, int rank) {
  const std::string mine = test_support::temp_directory() + "/accel-folder-of-rank-" + std::to_string(rank) + "-" +
                           (std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT") : "0");
  const std::string other = test_support::temp_directory() + "/accel-folder-of-rank-" + std::to_string(1 - rank);
  int failures = 0;
  for (const bool load : {false, true}) {
    const char* operation = load ? "load_state" : "save_state";
    const auto start = std::chrono::steady_clock::now();
    const int code = checkpoint(training, load, mine);
    const std::string message = accel_error_last();
    std::fprintf(stderr, "rank %d %s: %s: %s\n", rank, operation, accel_error_name(code), message.c_str());
    failures += expect(code == ACCEL_ERR_INVALID_ARGUMENT, std::string(operation) + " fails with ACCEL_ERR_INVALID_ARGUMENT");
    failures += expect(seconds_since(start) < kLimitS, std::string(operation) + " fails within the limit");
    failures += expect(contains(message, std::string(operation) + ": the processes name different checkpoint folders"),
                       "the message says the folders differ");
    failures += expect(contains(message, mine) && contains(message, other), "the message names both folders");
    failures += expect(!accel::is_directory(mine), "nothing is written");
    failures += expect(accel_state_is_broken(training.state) == 0, "the group is not broken");
    failures += expect(accel_state_wait_for_everyone(training.state) == ACCEL_OK, "the next barrier goes through");
  }
  return failures;
}

int run(const std::string& mode, int rank) {
  Training training;
  if (!set_up(training)) return 1;
  if (mode == "different-folders") return run_different_folders(training, rank);
  const std::string directory =
      test_support::temp_directory() + "/accel-one-rank-" + mode + "-" + (std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT") : "0");
  const bool load = mode == "load-vs-barrier";
  if (load && checkpoint(training, false, directory) != ACCEL_OK) {
    std::fprintf(stderr, "the checkpoint to load: %s\n", accel_error_last());
    return 1;
  }
  if (accel_state_wait_for_everyone(training.state) != ACCEL_OK) return 1;
  const char* operation = load ? "load_state" : "save_state";
  const auto start = std::chrono::steady_clock::now();
  int failures = 0;
  const bool vs_step = mode == "save-vs-step";
  const std::vector<std::string> met = {std::string("process 0: ") + operation, "process 1: wait_for_everyone"};
  if (rank == 0) {
    const int code = checkpoint(training, load, directory);
    failures += expect_failed_fast(training, rank, operation, code, seconds_since(start),
                                   vs_step ? std::vector<std::string>{operation, "rank 1"} : met, vs_step);
  } else if (vs_step) {
    const int code = training_step(training, rank);
    failures += expect_failed_fast(training, rank, "backward", code, seconds_since(start),
                                   {"DDP gradient all-reduce", "rank 0 ", operation}, true);
  } else {
    // Late, so that rank 0 waits in its call first: rank 1 must still learn why, and both fail together.
    if (mode == "save-vs-barrier") sleep(3);
    const int code = accel_state_wait_for_everyone(training.state);
    failures += expect_failed_fast(training, rank, "wait_for_everyone", code, seconds_since(start), met, false);
  }
  if (rank == 0) accel::remove_all(directory);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank_text = std::getenv("RANK");
  const int rank = rank_text ? std::atoi(rank_text) : 0;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "save-vs-step" && mode != "save-vs-barrier" && mode != "load-vs-barrier" && mode != "different-folders") {
    std::fprintf(stderr, "usage: one_rank_save_worker save-vs-step|save-vs-barrier|load-vs-barrier|different-folders\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  int failures = run(mode, rank);
  // Every handle is freed by now, the process group with them.
  failures += expect(seconds_since(start) < 2 * kLimitS, "the worker ends without waiting out the timeout");
  return failures;
}
