// train_digits_cpp's training with the model as a torch::nn::Module of LibTorch's C++ frontend
// (bindings/cpp/accel_torch.hpp): the same MLP (64-128-128-10, initialised as examples/make_mlp.py does:
// seed 0), the same digits, split, batches, AdamW, cosine schedule and clipping, but the forward, the loss and
// autograd are the program's own, in LibTorch; accel brings the loader, rank 0's weights on every rank, the
// gradient all-reduce (autograd accumulates into the gradient buckets), clipping, the optimizer and the
// schedule. It trains to the very weights of train_digits_cpp's TorchScript model (ctest compares the two
// files). The program links the LibTorch that libaccel was built against. Run with accel launch:
//   accel launch --nproc-per-node 2 --cpu --master-port 0 -- train_digits_module_cpp DIGITS.csv.gz [EPOCHS] [SAVE_DIR]
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "accel.hpp"
#include "accel_torch.hpp"
#include "digits.hpp"

namespace {

// examples/make_mlp.py's MLP, with its parameter names.
struct MLPImpl : torch::nn::Module {
  MLPImpl(int64_t inputs, int64_t hidden1, int64_t hidden2, int64_t outputs)
      : fc1(register_module("fc1", torch::nn::Linear(inputs, hidden1))),
        fc2(register_module("fc2", torch::nn::Linear(hidden1, hidden2))),
        fc3(register_module("fc3", torch::nn::Linear(hidden2, outputs))) {}

  at::Tensor forward(const at::Tensor& x) { return fc3(at::relu(fc2(at::relu(fc1(x))))); }

  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(MLP);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: train_digits_module_cpp DIGITS.csv[.gz] [EPOCHS] [SAVE_DIR]\n";
    return 2;
  }
  const int64_t epochs = argc > 2 ? std::atoll(argv[2]) : 20;
  try {
    accel::State state;
    auto [train_loader, test_loader, train_rows] = digits::loaders(state, argv[1]);

    at::manual_seed(0);  // make_mlp.py's initial weights
    MLP net(digits::kPixels, 128, 128, digits::kClasses);
    accel::ModuleModel model(state, *net);  // rank 0's weights in every rank's module
    const auto optimizer_options = digits::adamw_options();
    accel::Optimizer optimizer(model.model(), "adamw", &optimizer_options);
    const auto schedule_options = digits::cosine_options(epochs, train_rows);
    accel::Scheduler scheduler(optimizer, "cosine", &schedule_options);

    {
      accel::Progress progress(state, epochs * train_loader.length(), "training");
      for (int64_t epoch = 0; epoch < epochs; ++epoch) {
        net->train();
        while (auto batch = train_loader.next()) {
          state.accumulate();
          model.begin_forward();
          const auto loss = at::cross_entropy_loss(net->forward(accel::to_torch((*batch)["x"])), accel::to_torch((*batch)["y"]));
          model.backward(loss);  // every gradient the average over the ranks when it returns
          if (state.sync_gradients()) state.clip_grad_norm(model.model(), 1.0);
          optimizer.step();
          optimizer.zero_grad();
          scheduler.step();
          progress.update(1, loss.item<double>());
        }
      }
    }

    net->eval();
    state.print(digits::test_accuracy(state, test_loader, [&](const accel::Tensor& x) {
      at::NoGradGuard no_grad;
      model.begin_forward(/*grad_enabled=*/false);
      const auto logits = net->forward(accel::to_torch(x)).contiguous();
      return std::vector<float>(logits.data_ptr<float>(), logits.data_ptr<float>() + logits.numel());
    }));
    if (argc > 3) state.save_model(model.model(), argv[3]);  // the module's own tensors, as safetensors
    state.shutdown();
  } catch (const std::exception& error) {
    std::cerr << "train_digits_module_cpp: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
