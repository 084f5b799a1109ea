// The plain-LibTorch side of the training benchmarks: the loop of bench/train_accel.c written directly on
// LibTorch, without accel (bench/run_train.sh on the CPU and bench/run_gpu.sh on a GPU run both, one
// process each, and compare step times).
//
//   train_libtorch MODEL [steps] [warmup] [flags...]
//
// torch::jit::load of examples/make_mlp.py's MLP 784-1024-1024-10, trained with torch::optim::SGD
// (lr 0.01, no momentum) and at::cross_entropy_loss on the same synthetic batches as train_accel.c (the same
// xorshift64* numbers, rank 0's), at::set_num_threads(1). A step: optimizer.zero_grad(), forward, loss,
// backward, optimizer.step() -- LibTorch 1.13's zero_grad() zeroes the gradients in place.
// The loss of the last warm-up step is read before the clock starts and the loss of the last timed step
// before it stops: on a GPU the steps only queue kernels, and reading a loss waits for them (accel's C API
// has no synchronize, so every side of the GPU benchmark waits this way).
// Prints one line of key=value pairs like train_accel's (step_ms, samples_per_s, losses, threads, device,
// precision).
// Flags:
//   profile       time each part of the step on its own and add the mean ms per step of each (on the CPU:
//                 a GPU step's parts only queue kernels)
//   set_to_none   drop the gradients instead of zeroing them (what accel_optimizer_zero_grad does)
//   cuda          the model and the batches on cuda:0, the batches copied there before the first step
//   bf16          the forward under autocast to bfloat16 on the device in use, its logits back to float32
//                 before the loss (what accel's forward does with mixed_precision=bf16)
//   serve         after the warm-up print "ready", then time a round (`warmup` more steps, `steps` timed
//                 ones, its line) for every line read from standard input, until the input ends
//                 (bench/run_gpu.sh keeps every side's process up and interleaves their rounds)
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>
#include <torch/script.h>
#include <torch/version.h>

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
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

// Autocast to bfloat16 on one device type for the life of the object, as torch.autocast's context manager
// and accel's forward do it: the cache of low-precision weight copies is dropped at the end, since the
// optimizer changes the weights in place.
class Bf16Autocast {
 public:
  explicit Bf16Autocast(c10::DeviceType device) : device_(device) {
    enable(true);
    at::autocast::increment_nesting();
  }
  ~Bf16Autocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    enable(false);
  }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  void enable(bool on) {
// LibTorch 2.4 replaced the per-device setters with device-typed ones (the old ones warn on every call);
// 1.13 has only the old ones.
#if TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR >= 204
    at::autocast::set_autocast_enabled(device_, on);
    if (on) at::autocast::set_autocast_dtype(device_, at::kBFloat16);
#else
    if (device_ == c10::DeviceType::CUDA) {
      at::autocast::set_enabled(on);
      if (on) at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    } else {
      at::autocast::set_cpu_enabled(on);
      if (on) at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    }
#endif
  }
  c10::DeviceType device_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_libtorch MODEL [steps >= 1] [warmup >= 1] [profile] [set_to_none] [cuda] [bf16] "
                         "[serve]\n");
    return 2;
  }
  const std::string model_path = argv[1];
  const long steps = argc > 2 ? std::atol(argv[2]) : 100;
  const long warmup = argc > 3 ? std::atol(argv[3]) : 10;
  bool profile = false, set_to_none = false, cuda = false, bf16 = false, serve = false;
  for (int i = 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "profile") == 0) {
      profile = true;
    } else if (std::strcmp(argv[i], "set_to_none") == 0) {
      set_to_none = true;
    } else if (std::strcmp(argv[i], "cuda") == 0) {
      cuda = true;
    } else if (std::strcmp(argv[i], "bf16") == 0) {
      bf16 = true;
    } else if (std::strcmp(argv[i], "serve") == 0) {
      serve = true;
    } else {
      std::fprintf(stderr, "train_libtorch: unknown flag '%s'\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1 || warmup < 1) {
    std::fprintf(stderr, "train_libtorch: steps and warmup must be >= 1\n");
    return 2;
  }
  if (cuda && !torch::cuda::is_available()) {
    std::fprintf(stderr, "train_libtorch: cuda asked for, but LibTorch %s sees no CUDA device\n", TORCH_VERSION);
    return 1;
  }
  at::set_num_threads(1);
  const char* omp = std::getenv("OMP_NUM_THREADS");

  const at::Device device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  std::vector<at::Tensor> x, y;
  make_batches(0, x, y);
  for (int64_t b = 0; b < kBatches; ++b) {
    x[b] = x[b].to(device);
    y[b] = y[b].to(device);
  }
  torch::jit::Module module = torch::jit::load(model_path);
  module.to(device);
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
    at::Tensor logits;
    {
      std::optional<Bf16Autocast> autocast;
      if (bf16) autocast.emplace(device.type());
      logits = module.forward({x[b]}).toTensor();
    }
    if (bf16) logits = logits.to(at::kFloat);
    mark(kForward);
    at::Tensor loss = at::cross_entropy_loss(logits, y[b]);
    mark(kLoss);
    loss.backward();
    mark(kBackward);
    optimizer.step();
    mark(kStep);
    return loss;
  };

  // The batches are cycled through by a count of the steps taken, round after round, as on every side.
  long taken = 0;
  float first_loss = 0.0f;
  auto warm_up = [&] {
    at::Tensor loss;
    for (long i = 0; i < warmup; ++i) {
      loss = step(taken++ % kBatches, false);
      if (taken == 1) first_loss = loss.item<float>();
    }
    loss.item<float>();  // no warm-up kernel still running on the clock
  };
  auto timed_round = [&] {
    std::fill(phase_s, phase_s + kPhases, 0.0);
    at::Tensor loss;
    const long faults_start = minor_faults();
    const double cpu_start = cpu_s();
    const double start = now_s();
    for (long i = 0; i < steps; ++i) loss = step(taken++ % kBatches, profile);
    const float last_loss = loss.item<float>();
    const double elapsed = now_s() - start;
    const double cpu_elapsed = cpu_s() - cpu_start;
    const long faults = minor_faults() - faults_start;
    const int threads = thread_count();

    std::printf("libtorch processes=1 steps=%ld warmup=%ld step_ms=%.3f samples_per_s=%.1f first_loss=%.6f "
                "last_loss=%.6f omp_num_threads=%s at_num_threads=%d threads=%d cpu_per_wall=%.2f "
                "page_faults_per_step=%.0f zero_grad=%s device=%s precision=%s torch=%s",
                steps, warmup, 1e3 * elapsed / steps, kBatch * steps / elapsed, first_loss, last_loss,
                omp ? omp : "unset", at::get_num_threads(), threads, cpu_elapsed / elapsed,
                static_cast<double>(faults) / steps, set_to_none ? "set_to_none" : "in_place", device.str().c_str(),
                bf16 ? "bf16" : "no", TORCH_VERSION);
    if (profile) {
      double sum = 0.0;
      for (int p = 0; p < kPhases; ++p) {
        std::printf(" %s_ms=%.3f", phase_names[p], 1e3 * phase_s[p] / steps);
        sum += phase_s[p];
      }
      std::printf(" phases_sum_ms=%.3f", 1e3 * sum / steps);
    }
    std::printf("\n");
    std::fflush(stdout);
  };

  warm_up();
  if (!serve) {
    timed_round();
    return 0;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (std::string line; std::getline(std::cin, line);) {
    warm_up();
    timed_round();
  }
  return 0;
}
