// One leg of the exact-resume test (exact_resume_test.sh), on every rank under `accel launch`, through
// the C ABI:
//   resume_worker train STEPS OUT [MAX_SHARD_SIZE]  STEPS steps from the start, then the model into OUT
//                                                  (sharded above MAX_SHARD_SIZE bytes; 10 GB by default)
//   resume_worker save STEPS CHECKPOINT     STEPS steps from the start, then accel_state_save_state
//   resume_worker resume STEPS CHECKPOINT OUT   accel_state_load_state, STEPS more steps, the model into OUT
//   resume_worker refuse 0 CHECKPOINT       accel_state_load_state must fail on every rank (exit 0 if so)
//   resume_worker background STEPS CHECKPOINT   STEPS steps, accel_state_save_state_async, STEPS more steps
//                                           while it writes, then accel_state_wait_for_save
//   resume_worker background_fails STEPS CHECKPOINT   STEPS steps, accel_state_save_state, one more step, then
//                                           a background save while rank 1's file writes fail: every rank
//                                           must report it ("rank <r> reported: ..." on stderr) and load the
//                                           checkpoint of step STEPS (background_save_test.sh)
//   resume_worker restartable STEPS PROJECT OUT   STEPS steps with numbered checkpoints in PROJECT every
//                                           kCheckpointEvery steps, the model into OUT; under `accel launch
//                                           --max-restarts`, rank 1 of the first attempt SIGKILLs itself after
//                                           step kKilledAfter, and a restarted attempt resumes from the latest
//                                           checkpoint (elastic_restart_test.sh)
// Every ingredient a checkpoint restores matters here: the loader shuffles (its position and generator),
// AdamW keeps moments, a linear schedule moves the lr, and each step adds noise from torch's default
// generator to the inputs (the per-rank RNG state), so leaving any of them out changes the result.
#include <ATen/ATen.h>
#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "accel.h"
#include "tiny_models.hpp"

namespace {

constexpr int64_t kSamples = 24;  // 6 batches of 2 per rank and epoch on 2 ranks
constexpr long kCheckpointEvery = 4;
// Two steps past the checkpoint of step 8, in the middle of the second epoch: the restart must redo them.
constexpr long kKilledAfter = 10;

void check(int code, const char* what) {
  if (code != ACCEL_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, accel_error_last());
    std::exit(1);
  }
}

accel_tensor_t* tensor_of(const at::Tensor& values) {
  const at::Tensor contiguous = values.contiguous();
  accel_tensor_t* tensor = nullptr;
  const std::vector<int64_t> shape = contiguous.sizes().vec();
  check(accel_tensor_from_buffer(&tensor, contiguous.data_ptr(), ACCEL_DTYPE_FLOAT32, shape.data(), shape.size()),
        "accel_tensor_from_buffer");
  return tensor;
}

// A per-rank object of the caller's, registered for checkpointing: rank * 1000 + the steps taken, so a
// resumed rank can tell that it got its own bytes back from the step where they were saved.
int64_t g_counter = 0;

int save_counter(accel_sink_t* sink, void*) { return accel_sink_write(sink, &g_counter, sizeof g_counter) == ACCEL_OK ? 0 : 1; }

int load_counter(const void* data, size_t size, void*) {
  if (size != sizeof g_counter) return 1;
  std::memcpy(&g_counter, data, size);
  return 0;
}

void expect_counter(accel_state_t* state, long steps) {
  const int64_t expected = accel_state_process_index(state) * 1000 + steps;
  if (g_counter != expected) {
    std::fprintf(stderr, "registered counter: %ld after loading, expected %ld\n", static_cast<long>(g_counter),
                 static_cast<long>(expected));
    std::exit(1);
  }
}

struct Training {
  accel_state_t* state = nullptr;
  accel_loader_t* loader = nullptr;
  accel_model_t* model = nullptr;
  accel_optimizer_t* optimizer = nullptr;
  accel_scheduler_t* scheduler = nullptr;
};

// project_dir: where numbered checkpoints go, or nullptr for none.
Training start_training(const char* project_dir) {
  Training run;
  accel_options_t* state_options = nullptr;
  check(accel_options_new(&state_options), "accel_options_new");
  if (project_dir != nullptr) check(accel_options_set_string(state_options, "project_dir", project_dir), "project_dir");
  check(accel_state_new(&run.state, state_options), "accel_state_new");
  accel_options_free(state_options);
  g_counter = accel_state_process_index(run.state) * 1000;
  check(accel_state_register_for_checkpointing(run.state, "counter", save_counter, load_counter, nullptr),
        "accel_state_register_for_checkpointing");
  // Accelerate's set_seed: every leg starts from the same random numbers (the loader's below).
  at::manual_seed(1234);
  // Fixed data, made without any generator so that every leg sees the same samples.
  const at::Tensor rows = at::arange(kSamples * 8, at::kFloat).reshape({kSamples, 8});
  const at::Tensor inputs = at::sin(rows * 0.37);
  const at::Tensor targets = at::cos(rows.narrow(1, 0, 4) * 0.11);
  accel_tensor_t* fields[] = {tensor_of(inputs), tensor_of(targets)};
  const char* names[] = {"x", "y"};
  accel_dataset_t* dataset = nullptr;
  check(accel_dataset_from_tensors(&dataset, names, fields, 2), "accel_dataset_from_tensors");
  accel_options_t* loader_options = nullptr;
  check(accel_options_new(&loader_options), "accel_options_new");
  check(accel_options_set_int(loader_options, "batch_size", 2), "batch_size");
  check(accel_options_set_bool(loader_options, "shuffle", 1), "shuffle");
  check(accel_options_set_int(loader_options, "data_seed", 42), "data_seed");
  check(accel_loader_new(&run.loader, run.state, dataset, loader_options), "accel_loader_new");

  check(accel_model_load(&run.model, tiny_models::mlp(tiny_models::temp_file("resume.pt")).c_str()), "accel_model_load");
  check(accel_state_prepare_model(run.state, run.model, nullptr), "accel_state_prepare_model");
  accel_options_t* optimizer_options = nullptr;
  check(accel_options_new(&optimizer_options), "accel_options_new");
  check(accel_options_set_double(optimizer_options, "lr", 0.01), "lr");
  check(accel_optimizer_new(&run.optimizer, run.model, "adamw", optimizer_options), "accel_optimizer_new");
  accel_options_t* schedule = nullptr;
  check(accel_options_new(&schedule), "accel_options_new");
  check(accel_options_set_int(schedule, "total_steps", 100), "total_steps");
  check(accel_scheduler_new(&run.scheduler, run.optimizer, "linear", schedule), "accel_scheduler_new");

  accel_options_free(schedule);
  accel_options_free(optimizer_options);
  accel_options_free(loader_options);
  accel_dataset_free(dataset);
  for (accel_tensor_t* field : fields) accel_tensor_free(field);
  return run;
}

void train_step(Training& run) {
  ++g_counter;
  accel_batch_t* batch = nullptr;
  check(accel_loader_next(run.loader, &batch), "accel_loader_next");
  if (batch == nullptr) check(accel_loader_next(run.loader, &batch), "accel_loader_next (next epoch)");
  accel_tensor_t* x = nullptr;
  accel_tensor_t* y = nullptr;
  check(accel_batch_get(batch, "x", &x), "accel_batch_get x");
  check(accel_batch_get(batch, "y", &y), "accel_batch_get y");
  void* x_data = nullptr;
  check(accel_tensor_data(x, &x_data), "accel_tensor_data");
  const at::Tensor noisy = at::from_blob(x_data, {accel_tensor_shape(x)[0], 8}) + 0.1 * at::randn({accel_tensor_shape(x)[0], 8});
  accel_tensor_t* input = tensor_of(noisy);

  check(accel_state_accumulate(run.state), "accel_state_accumulate");
  accel_output_t* output = nullptr;
  check(accel_model_forward(run.model, &input, 1, nullptr, nullptr, 0, &output), "accel_model_forward");
  accel_tensor_t* prediction = nullptr;
  check(accel_output_get(output, 0, &prediction), "accel_output_get");
  accel_tensor_t* loss = nullptr;
  check(accel_loss_compute(&loss, "mse", prediction, y, nullptr), "accel_loss_compute");
  check(accel_state_backward(run.state, loss), "accel_state_backward");
  check(accel_optimizer_step(run.optimizer), "accel_optimizer_step");
  check(accel_scheduler_step(run.scheduler), "accel_scheduler_step");
  check(accel_optimizer_zero_grad(run.optimizer), "accel_optimizer_zero_grad");

  for (accel_tensor_t* tensor : {loss, prediction, input, x, y}) accel_tensor_free(tensor);
  accel_output_free(output);
  accel_batch_free(batch);
}

void release(Training& run) {
  accel_scheduler_free(run.scheduler);
  accel_optimizer_free(run.optimizer);
  accel_model_free(run.model);
  accel_loader_free(run.loader);
  accel_state_free(run.state);
  run = Training{};
}

void finish(Training& run) {
  check(accel_state_shutdown(run.state), "accel_state_shutdown");
  release(run);
}

int checkpoint_call(int (*call)(accel_state_t*, const char*, accel_model_t* const*, size_t, accel_optimizer_t* const*,
                                size_t, accel_scheduler_t* const*, size_t, accel_loader_t* const*, size_t),
                    Training& run, const char* directory) {
  return call(run.state, directory, &run.model, 1, &run.optimizer, 1, &run.scheduler, 1, &run.loader, 1);
}

// Every file write of this process fails with EFBIG from here on (root too), as on a full disk; the
// previous limit comes back with restore().
struct FullDisk {
  struct rlimit previous {};
  FullDisk() {
    std::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &previous);
    struct rlimit none = previous;
    none.rlim_cur = 0;
    ::setrlimit(RLIMIT_FSIZE, &none);
  }
  void restore() const { ::setrlimit(RLIMIT_FSIZE, &previous); }
};

int background_save(Training& run, bool fails, long steps, const char* checkpoint) {
  const auto rank = static_cast<int>(accel_state_process_index(run.state));
  for (long step = 1; step <= steps; ++step) train_step(run);
  if (!fails) {
    check(checkpoint_call(accel_state_save_state_async, run, checkpoint), "accel_state_save_state_async");
    // Everything the snapshot holds moves on meanwhile: parameters, moments, lr, loader, generators, counter.
    for (long step = 1; step <= steps; ++step) train_step(run);
    check(accel_state_wait_for_save(run.state), "accel_state_wait_for_save");
    return 0;
  }
  check(checkpoint_call(accel_state_save_state, run, checkpoint), "accel_state_save_state");
  train_step(run);
  std::unique_ptr<FullDisk> full;
  if (rank == 1) full = std::make_unique<FullDisk>();
  check(checkpoint_call(accel_state_save_state_async, run, checkpoint), "accel_state_save_state_async");
  const int code = accel_state_wait_for_save(run.state);
  if (full) full->restore();
  if (code != ACCEL_ERR_IO) {
    std::fprintf(stderr, "rank %d: accel_state_wait_for_save returned %d, not ACCEL_ERR_IO: %s\n", rank, code, accel_error_last());
    return 1;
  }
  std::fprintf(stderr, "rank %d reported: %s\n", rank, accel_error_last());
  check(accel_state_wait_for_save(run.state), "accel_state_wait_for_save (the failure reported already)");
  // Loaded into fresh objects, as a restarted run would (the loader is in the middle of an epoch here);
  // made before the old ones go, so that the process group stays.
  Training fresh = start_training(nullptr);
  release(run);
  run = fresh;
  check(checkpoint_call(accel_state_load_state, run, checkpoint), "accel_state_load_state");
  expect_counter(run.state, steps);  // the checkpoint of step STEPS, not the failed one of step STEPS + 1
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 3 ? argv[1] : "";
  const bool restartable = mode == "restartable";
  const bool with_out = mode == "resume" || restartable;
  const bool background = mode == "background" || mode == "background_fails";
  const bool argc_fits = with_out ? argc == 5 : (argc == 4 || (mode == "train" && argc == 5));
  if ((mode != "train" && mode != "save" && mode != "refuse" && !background && !with_out) || !argc_fits) {
    std::fprintf(stderr,
                 "usage: %s train STEPS DIR [MAX_SHARD_SIZE], save|refuse|background|background_fails STEPS DIR, "
                 "resume STEPS CHECKPOINT OUT, or restartable STEPS PROJECT OUT\n",
                 argv[0]);
    return 2;
  }
  const long steps = std::strtol(argv[2], nullptr, 10);
  Training run = start_training(restartable ? argv[3] : nullptr);
  if (background) {
    const int status = background_save(run, mode == "background_fails", steps, argv[3]);
    if (status != 0) return status;
    finish(run);
    return 0;
  }
  if (mode == "refuse") {
    if (checkpoint_call(accel_state_load_state, run, argv[3]) == ACCEL_OK) {
      std::fprintf(stderr, "accel_state_load_state accepted a damaged checkpoint\n");
      return 1;
    }
    std::fprintf(stderr, "refused as expected: %s\n", accel_error_last());
    return 0;
  }
  if (mode == "resume") {
    check(checkpoint_call(accel_state_load_state, run, argv[3]), "accel_state_load_state");
    expect_counter(run.state, steps);  // exact_resume_test.sh saves after as many steps as it resumes for
  }
  const char* restarts = std::getenv("ACCEL_RESTART_COUNT");
  const bool first_attempt = restarts == nullptr || std::string(restarts) == "0";
  long done = 0;
  if (restartable && !first_attempt) {
    check(checkpoint_call(accel_state_load_state, run, nullptr), "accel_state_load_state (latest)");
    // The scheduler moves once per process for each step (Accelerate's rule).
    done = static_cast<long>(accel_scheduler_step_count(run.scheduler) / accel_state_num_processes(run.state));
    expect_counter(run.state, done);
    if (accel_state_is_main_process(run.state)) std::printf("restart %s: resumed after step %ld\n", restarts, done);
  }
  for (long step = done + 1; step <= steps; ++step) {
    train_step(run);
    if (restartable && step % kCheckpointEvery == 0) {
      check(checkpoint_call(accel_state_save_state, run, nullptr), "accel_state_save_state (numbered)");
    }
    if (restartable && first_attempt && step == kKilledAfter && accel_state_process_index(run.state) == 1) {
      std::raise(SIGKILL);
    }
  }
  if (mode == "save") {
    check(checkpoint_call(accel_state_save_state, run, argv[3]), "accel_state_save_state");
  } else {
    const size_t max_shard_size = mode == "train" && argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 0;
    check(accel_state_save_model(run.state, run.model, mode == "train" ? argv[3] : argv[4], max_shard_size),
          "accel_state_save_model");
  }
  finish(run);
  return 0;
}
