// The demo's training (examples/train_digits.c) in C++ over bindings/cpp/accel.hpp: the same MLP
// (64-128-128-10, TorchScript from examples/make_mlp.py), the same digits, split, batches, AdamW with a
// cosine schedule and clipping (an accel::TrainStep per batch), evaluation through gather_for_metrics. Run with
// accel launch (with SAVE_DIR, the trained weights are saved there as model.safetensors):
//   accel launch --nproc-per-node 2 --cpu --master-port 0 -- train_digits_cpp MODEL.pt DIGITS.csv.gz [EPOCHS] [SAVE_DIR]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "accel.hpp"
#include "digits.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: train_digits_cpp MODEL.pt DIGITS.csv[.gz] [EPOCHS] [SAVE_DIR]\n";
    return 2;
  }
  const int64_t epochs = argc > 3 ? std::atoll(argv[3]) : 20;
  try {
    accel::State state;
    auto [train_loader, test_loader, train_rows] = digits::loaders(state, argv[2]);

    accel::Model model(argv[1]);
    state.prepare(model);
    const auto optimizer_options = digits::adamw_options();
    accel::Optimizer optimizer(model, "adamw", &optimizer_options);
    const auto schedule_options = digits::cosine_options(epochs, train_rows);
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

    model.train(false);
    state.print(digits::test_accuracy(state, test_loader, [&](const accel::Tensor& x) {
      return model.forward(x, /*with_graph=*/false).values<float>();
    }));
    if (argc > 4) state.save_model(model, argv[4]);
    state.shutdown();
  } catch (const std::exception& error) {
    std::cerr << "train_digits_cpp: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
