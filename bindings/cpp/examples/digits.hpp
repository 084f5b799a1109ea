// The digits the C++ examples train on, read and split as examples/train_digits.c does: sklearn's
// digits.csv.gz, pixels scaled to [0, 1], the C demo's fixed shuffle, the last 360 rows held out.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "accel.hpp"

namespace digits {

constexpr int64_t kPixels = 64, kClasses = 10, kTestRows = 360;

struct Digits {
  std::vector<float> pixels;  // rows x 64, scaled to [0, 1]
  std::vector<int64_t> labels;
};

// sklearn's digits.csv.gz: 64 pixel values (0..16) and a label per line, read through gzip -dc.
inline Digits read_digits(const std::string& path) {
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
inline void shuffle(Digits& digits) {
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

inline Split rows(const Digits& digits, int64_t first, int64_t count) {
  const std::vector<float> x(digits.pixels.begin() + first * kPixels, digits.pixels.begin() + (first + count) * kPixels);
  const std::vector<int64_t> y(digits.labels.begin() + first, digits.labels.begin() + first + count);
  return {accel::Tensor::from(x, {count, kPixels}), accel::Tensor::from(y, {count})};
}

// The training rows and the held-out test rows, shuffled as the C demo shuffles them.
inline std::pair<Split, Split> train_and_test(const std::string& path) {
  Digits digits = read_digits(path);
  shuffle(digits);
  const auto total_rows = static_cast<int64_t>(digits.labels.size());
  return {rows(digits, 0, total_rows - kTestRows), rows(digits, total_rows - kTestRows, kTestRows)};
}

// The examples' loaders: the training rows in shuffled batches of 32 (data_seed 42), the test rows in
// batches of 64; train_rows sizes the schedule.
struct Loaders {
  accel::Loader train, test;
  int64_t train_rows;
};

inline Loaders loaders(accel::State& state, const std::string& path) {
  const auto [train, test] = train_and_test(path);
  const auto train_set = accel::Dataset::from_tensors({{"x", &train.x}, {"y", &train.y}});
  const auto test_set = accel::Dataset::from_tensors({{"x", &test.x}, {"y", &test.y}});
  accel::Options train_options, test_options;
  train_options.set("batch_size", "32").set("shuffle", "true").set("data_seed", "42");
  test_options.set("batch_size", "64");
  return {accel::Loader(state, train_set, &train_options), accel::Loader(state, test_set, &test_options),
          train.x.shape()[0]};
}

// The examples' AdamW: lr 0.01, weight decay 0.01 except on biases.
inline accel::Options adamw_options() {
  accel::Options options;
  options.set("lr", "0.01").set("weight_decay", "0.01").set("no_decay", "*bias");
  return options;
}

// Their cosine schedule with 5% warm-up, sized in single-process steps as Accelerate's scheduler rule expects.
inline accel::Options cosine_options(int64_t epochs, int64_t train_rows) {
  const int64_t single_process_steps = epochs * ((train_rows + 31) / 32);
  accel::Options options;
  options.set("total_steps", std::to_string(single_process_steps))
      .set("warmup_steps", std::to_string(single_process_steps / 20));
  return options;
}

// Evaluates on this rank's test batches: the argmax of predict(x)'s logits, gathered with gather_for_metrics
// so that each test row counts once. The line the examples end with.
template <class Predict>
std::string test_accuracy(accel::State& state, accel::Loader& loader, Predict&& predict) {
  int64_t correct = 0, counted = 0;
  while (auto batch = loader.next()) {
    const auto logits = predict((*batch)["x"]);
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
  return line;
}

}  // namespace digits
