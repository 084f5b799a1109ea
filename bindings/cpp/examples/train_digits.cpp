// The demo's training (examples/train_digits.c) in C++ over bindings/cpp/accel.hpp: the same MLP
// (64-128-128-10, TorchScript from examples/make_mlp.py), the same digits, split, batches, AdamW with a
// cosine schedule and clipping (an accel::TrainStep per batch), evaluation through gather_for_metrics. Run with
// accel launch:
//   accel launch --nproc-per-node 2 --cpu --master-port 0 -- train_digits_cpp MODEL.pt DIGITS.csv.gz [EPOCHS]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "accel.hpp"

namespace {

constexpr int64_t kPixels = 64, kClasses = 10, kTestRows = 360;

struct Digits {
  std::vector<float> pixels;  // rows x 64, scaled to [0, 1]
  std::vector<int64_t> labels;
};

// sklearn's digits.csv.gz: 64 pixel values (0..16) and a label per line, read through gzip -dc.
Digits read_digits(const std::string& path) {
  const bool compressed = path.size() > 3 && path.substr(path.size() - 3) == ".gz";
  std::FILE* file = compressed ? popen(("gzip -dc '" + path + "'").c_str(), "r") : std::fopen(path.c_str(), "r");
  if (file == nullptr) throw std::runtime_error("cannot read " + path);
  Digits digits;
  char line[1024];
  while (std::fgets(line, sizeof line, file) != nullptr) {
    std::istringstream fields(line);
    std::string field;
    std::vector<long> values;
    while (std::getline(fields, field, ',')) values.push_back(std::strtol(field.c_str(), nullptr, 10));
    if (values.size() != kPixels + 1) continue;
    for (int64_t p = 0; p < kPixels; ++p) digits.pixels.push_back(static_cast<float>(values[p]) / 16.0f);
    digits.labels.push_back(values[kPixels]);
  }
  if (compressed ? pclose(file) != 0 : std::fclose(file) != 0) throw std::runtime_error("error reading " + path);
  if (static_cast<int64_t>(digits.labels.size()) <= kTestRows) throw std::runtime_error(path + " has too few rows");
  return digits;
}

// The C demo's fixed shuffle (splitmix64, Fisher-Yates, seed 0), so both hold out the same test rows.
void shuffle(Digits& digits) {
  uint64_t state = 0;
  auto next = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (auto i = static_cast<int64_t>(digits.labels.size()) - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(next() % static_cast<uint64_t>(i + 1));
    for (int64_t p = 0; p < kPixels; ++p) std::swap(digits.pixels[i * kPixels + p], digits.pixels[j * kPixels + p]);
    std::swap(digits.labels[i], digits.labels[j]);
  }
}

struct Split {
  accel::Tensor x, y;
};

Split rows(const Digits& digits, int64_t first, int64_t count) {
  const std::vector<float> x(digits.pixels.begin() + first * kPixels, digits.pixels.begin() + (first + count) * kPixels);
  const std::vector<int64_t> y(digits.labels.begin() + first, digits.labels.begin() + first + count);
  return {accel::Tensor::from(x, {count, kPixels}), accel::Tensor::from(y, {count})};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: train_digits_cpp MODEL.pt DIGITS.csv[.gz] [EPOCHS]\n";
    return 2;
  }
  const int64_t epochs = argc > 3 ? std::atoll(argv[3]) : 20;
  try {
    accel::State state;
    Digits digits = read_digits(argv[2]);
    shuffle(digits);
    const auto total_rows = static_cast<int64_t>(digits.labels.size());
    const Split train = rows(digits, 0, total_rows - kTestRows), test = rows(digits, total_rows - kTestRows, kTestRows);
    const auto train_set = accel::Dataset::from_tensors({{"x", &train.x}, {"y", &train.y}});
    const auto test_set = accel::Dataset::from_tensors({{"x", &test.x}, {"y", &test.y}});
    accel::Options train_options, test_options;
    train_options.set("batch_size", "32").set("shuffle", "true").set("data_seed", "42");
    test_options.set("batch_size", "64");
    accel::Loader train_loader(state, train_set, &train_options), test_loader(state, test_set, &test_options);

    accel::Model model(argv[1]);
    state.prepare(model);
    accel::Options optimizer_options, schedule_options;
    optimizer_options.set("lr", "0.01").set("weight_decay", "0.01").set("no_decay", "*bias");
    accel::Optimizer optimizer(model, "adamw", &optimizer_options);
    // Sized in single-process steps, as Accelerate's scheduler rule expects.
    const int64_t single_process_steps = epochs * ((total_rows - kTestRows + 31) / 32);
    schedule_options.set("total_steps", std::to_string(single_process_steps))
        .set("warmup_steps", std::to_string(single_process_steps / 20));
    accel::Scheduler scheduler(optimizer, "cosine", &schedule_options);
    // Each batch: accumulate, forward, the cross-entropy, backward, clipping on sync steps, step, zero_grad.
    accel::Options step_options;
    step_options.set("loss", "cross_entropy").set("max_grad_norm", "1.0");
    accel::TrainStep step(model, optimizer, &step_options);

    {
      accel::Progress progress(state, epochs * train_loader.length(), "training");
      for (int64_t epoch = 0; epoch < epochs; ++epoch) {
        model.train(true);
        while (auto batch = train_loader.next()) {
          const auto x = (*batch)["x"], y = (*batch)["y"];
          const auto loss = step.run(x, &y);
          scheduler.step();
          progress.update(1, static_cast<double>(loss.values<float>()[0]));
        }
      }
    }

    int64_t correct = 0, counted = 0;
    model.train(false);
    while (auto batch = test_loader.next()) {
      const auto logits = model.forward((*batch)["x"], /*with_graph=*/false).values<float>();
      std::vector<int64_t> predictions;
      for (size_t row = 0; row * kClasses < logits.size(); ++row) {
        int64_t best = 0;
        for (int64_t c = 1; c < kClasses; ++c) best = logits[row * kClasses + c] > logits[row * kClasses + best] ? c : best;
        predictions.push_back(best);
      }
      const auto all_predictions =
          state.gather_for_metrics(accel::Tensor::from(predictions, {static_cast<int64_t>(predictions.size())}));
      const auto all_labels = state.gather_for_metrics((*batch)["y"]).values<int64_t>();
      const auto predicted = all_predictions.values<int64_t>();
      for (size_t i = 0; i < predicted.size(); ++i) correct += predicted[i] == all_labels[i];
      counted += static_cast<int64_t>(predicted.size());
    }
    char line[96];
    std::snprintf(line, sizeof line, "test accuracy: %.2f (%lld of %lld)", static_cast<double>(correct) / counted,
                  static_cast<long long>(correct), static_cast<long long>(counted));
    state.print(line);
    state.shutdown();
  } catch (const std::exception& error) {
    std::cerr << "train_digits_cpp: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
