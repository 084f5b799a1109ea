// One leg of the resume-on-another-number-of-processes test (reshard_resume_test.sh), on every rank under
// `accel launch`, through the C ABI. A shuffled loader over 26 samples numbered 0..25; each step every
// rank's batch is gathered and rank 0 writes the step's sample numbers, one line a step, to OUT:
//   reshard_resume_worker order BATCH STEPS OUT              STEPS steps from the start
//   reshard_resume_worker save BATCH STEPS CHECKPOINT        STEPS steps, then the loader's checkpoint
//   reshard_resume_worker resume BATCH STEPS CHECKPOINT OUT  the checkpoint loaded, then STEPS steps
//   reshard_resume_worker refuse BATCH CHECKPOINT            loading must fail on every rank naming the
//                                                             global batch (exit 0 if it does)
// BATCH is the per-process batch size: the global batch is BATCH x processes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "accel.h"

namespace {

constexpr int64_t kSamples = 26;  // not a multiple of the global batches used: the last step is short

void check(int code, const char* what) {
  if (code != ACCEL_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, accel_error_last());
    std::exit(1);
  }
}

struct Run {
  accel_state_t* state = nullptr;
  accel_loader_t* loader = nullptr;
};

Run start(int64_t batch_size) {
  Run run;
  check(accel_state_new(&run.state, nullptr), "accel_state_new");
  std::vector<int64_t> numbers(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) numbers[static_cast<size_t>(i)] = i;
  accel_tensor_t* field = nullptr;
  const int64_t shape[] = {kSamples};
  check(accel_tensor_from_buffer(&field, numbers.data(), ACCEL_DTYPE_INT64, shape, 1), "accel_tensor_from_buffer");
  const char* names[] = {"i"};
  accel_dataset_t* dataset = nullptr;
  check(accel_dataset_from_tensors(&dataset, names, &field, 1), "accel_dataset_from_tensors");
  accel_options_t* options = nullptr;
  check(accel_options_new(&options), "accel_options_new");
  check(accel_options_set_int(options, "batch_size", batch_size), "batch_size");
  check(accel_options_set_bool(options, "shuffle", 1), "shuffle");
  check(accel_loader_new(&run.loader, run.state, dataset, options), "accel_loader_new");
  accel_options_free(options);
  accel_dataset_free(dataset);
  accel_tensor_free(field);
  return run;
}

// One step: every rank's batch gathered; rank 0 appends the step's sample numbers to out (when given).
void step(Run& run, std::ofstream* out) {
  accel_batch_t* batch = nullptr;
  check(accel_loader_next(run.loader, &batch), "accel_loader_next");
  if (batch == nullptr) check(accel_loader_next(run.loader, &batch), "accel_loader_next (next epoch)");
  accel_tensor_t* numbers = nullptr;
  check(accel_batch_get(batch, "i", &numbers), "accel_batch_get");
  accel_tensor_t* gathered = nullptr;
  check(accel_state_gather(run.state, numbers, &gathered), "accel_state_gather");
  if (out != nullptr && accel_state_process_index(run.state) == 0) {
    void* data = nullptr;
    check(accel_tensor_data(gathered, &data), "accel_tensor_data");
    const auto* values = static_cast<const int64_t*>(data);
    for (int64_t i = 0; i < accel_tensor_shape(gathered)[0]; ++i) *out << (i ? " " : "") << values[i];
    *out << "\n";
  }
  accel_tensor_free(gathered);
  accel_tensor_free(numbers);
  accel_batch_free(batch);
}

int checkpoint(int (*call)(accel_state_t*, const char*, accel_model_t* const*, size_t, accel_optimizer_t* const*,
                           size_t, accel_scheduler_t* const*, size_t, accel_loader_t* const*, size_t),
               Run& run, const char* directory) {
  return call(run.state, directory, nullptr, 0, nullptr, 0, nullptr, 0, &run.loader, 1);
}

void finish(Run& run) {
  check(accel_state_shutdown(run.state), "accel_state_shutdown");
  accel_loader_free(run.loader);
  accel_state_free(run.state);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: reshard_resume_worker order|save|resume|refuse BATCH ...\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int64_t batch_size = std::atol(argv[2]);
  Run run = start(batch_size);
  if (mode == "refuse") {
    if (checkpoint(accel_state_load_state, run, argv[3]) == ACCEL_OK) {
      std::fprintf(stderr, "loading the checkpoint with another global batch succeeded\n");
      return 1;
    }
    const std::string message = accel_error_last();
    std::fprintf(stderr, "%s\n", message.c_str());
    finish(run);
    return message.find("needs the same global batch") != std::string::npos ? 0 : 1;
  }
  const long steps = std::atol(argv[3]);
  if (mode == "order" || mode == "resume") {
    if (mode == "resume") check(checkpoint(accel_state_load_state, run, argv[4]), "accel_state_load_state");
    std::ofstream out(argv[mode == "resume" ? 5 : 4]);
    for (long s = 0; s < steps; ++s) step(run, &out);
  } else if (mode == "save") {
    for (long s = 0; s < steps; ++s) step(run, nullptr);
    check(checkpoint(accel_state_save_state, run, argv[4]), "accel_state_save_state");
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  finish(run);
  return 0;
}
