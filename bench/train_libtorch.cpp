// The plain-LibTorch side of the training benchmark: the loop of bench/train_accel.c written directly on
// LibTorch, without accel (bench/run_train.sh runs both, one process each, and compares step times).
//
//   train_libtorch MODEL [steps] [warmup] [flags...]
//
// torch::jit::load of examples/make_mlp.py's MLP 784-1024-1024-10, trained with torch::optim::SGD
// (lr 0.01, no momentum) and at::cross_entropy_loss on the same synthetic batches as train_accel.c (the same
// xorshift64* numbers, rank 0's), at::set_num_threads(1). A step: optimizer.zero_grad(), forward, loss,
// backward, optimizer.step() -- LibTorch 1.13's zero_grad() zeroes the gradients in place.
// Prints one line of key=value pairs like train_accel's (step_ms, samples_per_s, losses, threads).
// Flags (for the analysis, not used by the benchmark's comparison):
//   profile       time each part of the step on its own and add the mean ms per step of each
//   set_to_none   drop the gradients instead of zeroing them (what accel_optimizer_zero_grad does)
#include <ATen/Parallel.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <torch/optim/sgd.h>
#include <torch/script.h>

#include <dirent.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int64_t kBatch = 64, kFeatures = 784, kClasses = 10, kBatches = 4;
constexpr double kLr = 0.01;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_s() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

int thread_count() {
  int count = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

// xorshift64*, seeded as train_accel.c seeds rank 0.
uint64_t rng_state;
uint64_t rng_next() {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

void make_batches(int rank, std::vector<at::Tensor>& x, std::vector<at::Tensor>& y) {
  rng_state = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank + 1) * 0xD1B54A32D192ED03ull);
  for (int64_t b = 0; b < kBatches; ++b) {
    auto features = at::empty({kBatch, kFeatures}, at::kFloat);
    auto labels = at::empty({kBatch}, at::kLong);
    float* f = features.data_ptr<float>();
    int64_t* l = labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < kBatch * kFeatures; ++i) f[i] = static_cast<float>(rng_next() >> 40) * (1.0f / 16777216.0f);
    for (int64_t i = 0; i < kBatch; ++i) l[i] = static_cast<int64_t>(rng_next() % kClasses);
    x.push_back(features);
    y.push_back(labels);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_libtorch MODEL [steps >= 1] [warmup >= 1] [profile] [set_to_none]\n");
    return 2;
  }
  const std::string model_path = argv[1];
  const long steps = argc > 2 ? std::atol(argv[2]) : 100;
  const long warmup = argc > 3 ? std::atol(argv[3]) : 10;
  bool profile = false, set_to_none = false;
  for (int i = 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "profile") == 0) {
      profile = true;
    } else if (std::strcmp(argv[i], "set_to_none") == 0) {
      set_to_none = true;
    } else {
      std::fprintf(stderr, "train_libtorch: unknown flag '%s'\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1 || warmup < 1) {
    std::fprintf(stderr, "train_libtorch: steps and warmup must be >= 1\n");
    return 2;
  }
  at::set_num_threads(1);
  const char* omp = std::getenv("OMP_NUM_THREADS");

  std::vector<at::Tensor> x, y;
  make_batches(0, x, y);
  torch::jit::Module module = torch::jit::load(model_path);
  module.train(true);
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : module.parameters()) parameters.push_back(parameter);
  torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(kLr));

  enum { kZeroGrad, kForward, kLoss, kBackward, kStep, kPhases };
  const char* const phase_names[kPhases] = {"zero_grad", "forward", "loss", "backward", "opt_step"};
  double phase_s[kPhases] = {};
  auto step = [&](int64_t b, bool timed) {
    double t0 = timed ? now_s() : 0.0;
    auto mark = [&](int phase) {
      if (!timed) return;
      const double t1 = now_s();
      phase_s[phase] += t1 - t0;
      t0 = t1;
    };
    if (set_to_none) {
      for (auto& parameter : parameters) {
        if (parameter.grad().defined()) parameter.mutable_grad() = at::Tensor();
      }
    } else {
      optimizer.zero_grad();
    }
    mark(kZeroGrad);
    at::Tensor logits = module.forward({x[b]}).toTensor();
    mark(kForward);
    at::Tensor loss = at::cross_entropy_loss(logits, y[b]);
    mark(kLoss);
    loss.backward();
    mark(kBackward);
    optimizer.step();
    mark(kStep);
    return loss;
  };

  float first_loss = 0.0f;
  for (long i = 0; i < warmup; ++i) {
    at::Tensor loss = step(i % kBatches, false);
    if (i == 0) first_loss = loss.item<float>();
  }
  at::Tensor loss;
  const long faults_start = minor_faults();
  const double cpu_start = cpu_s();
  const double start = now_s();
  for (long i = 0; i < steps; ++i) loss = step((warmup + i) % kBatches, profile);
  const double elapsed = now_s() - start;
  const double cpu_elapsed = cpu_s() - cpu_start;
  const long faults = minor_faults() - faults_start;
  const int threads = thread_count();
  const float last_loss = loss.item<float>();

  std::printf("libtorch processes=1 steps=%ld warmup=%ld step_ms=%.3f samples_per_s=%.1f first_loss=%.6f "
              "last_loss=%.6f omp_num_threads=%s at_num_threads=%d threads=%d cpu_per_wall=%.2f page_faults_per_step=%.0f "
              "zero_grad=%s",
              steps, warmup, 1e3 * elapsed / steps, kBatch * steps / elapsed, first_loss, last_loss, omp ? omp : "unset",
              at::get_num_threads(), threads, cpu_elapsed / elapsed, static_cast<double>(faults) / steps, set_to_none ? "set_to_none" : "in_place");
  if (profile) {
    double sum = 0.0;
    for (int p = 0; p < kPhases; ++p) {
      std::printf(" %s_ms=%.3f", phase_names[p], 1e3 * phase_s[p] / steps);
      sum += phase_s[p];
    }
    std::printf(" phases_sum_ms=%.3f", 1e3 * sum / steps);
  }
  std::printf("\n");
  return 0;
}
