// accel for a torch::nn::Module of LibTorch's C++ frontend, header only, over accel.hpp: the module's forward
// and autograd stay the program's; accel brings rank 0's weights on every rank, the gradient all-reduce
// overlapped with backward, accumulation and no_sync, clipping, the fp16 grad scaler, its optimizers and
// schedulers, and checkpoints of the module's own tensors.
//
// The module's parameters and buffers are shared with libaccel through DLPack (no copy), and each trainable
// parameter's .grad() becomes accel's gradient storage (with several processes a view into its gradient
// bucket, as DDP's gradient_as_bucket_view), so that autograd accumulates straight into it. A post hook on
// each parameter's gradient accumulator tells accel when that gradient is final, which starts its bucket's
// all-reduce while the rest of backward runs, as DDP's hooks do.
//
// The program and libaccel must use the same LibTorch (the one libaccel was built against): a tensor crosses
// as DLPack, but autograd's hooks run libaccel's calls on the program's tensors.
//
//   accel::State state;
//   Net net;                                            // a torch::nn::Module
//   accel::ModuleModel model(state, *net);              // prepared: rank 0's weights everywhere
//   accel::Optimizer optimizer(model.model(), "adamw"); // accel's optimizer on the module's tensors
//   for (...) {
//     state.accumulate();
//     model.begin_forward();
//     model.backward(torch::nn::functional::cross_entropy(net->forward(x), y));
//     optimizer.step();
//     optimizer.zero_grad();                            // zeroes the storage in place
//   }
//
// Thread safety: as accel.hpp's Model; the hooks run on the thread that runs backward (the caller's, on the
// CPU; autograd's device threads on a GPU), one at a time.
#pragma once

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "accel.hpp"

namespace accel {

// LibTorch's tensor as accel's, sharing its memory (a batch for a loader's dataset, say).
inline Tensor from_torch(const at::Tensor& tensor) {
  DLManagedTensor* managed = at::toDLPack(tensor.detach());
  try {
    return Tensor::from_dlpack(managed);
  } catch (...) {
    managed->deleter(managed);  // refused: still ours
    throw;
  }
}

// accel's tensor as LibTorch's, sharing its memory (a batch's field, a gradient view).
inline at::Tensor to_torch(const Tensor& tensor) { return at::fromDLPack(tensor.to_dlpack()); }

// A torch::nn::Module handed to accel. Construction is prepare(model): collective with several processes,
// it copies rank 0's parameters and buffers into every rank's module in place and installs the gradient
// storage. The module must stay alive as long as this object, and keep its tensors (do not replace a
// parameter); neither object may be copied or moved.
class ModuleModel {
 public:
  // Parameters with requires_grad false are frozen; a tensor registered under two names (tied weights)
  // is one parameter, under its first name. options: accel_state_prepare_model's (find_unused_parameters,
  // bucket_cap_mb, broadcast_buffers, ...).
  ModuleModel(State& state, torch::nn::Module& module, const Options* options = nullptr) : state_(&state) {
    std::vector<std::string> names, buffer_names;
    std::vector<Tensor> shared, shared_buffers;
    std::vector<bool> trainable;
    std::set<const c10::TensorImpl*> seen;
    for (const auto& item : module.named_parameters()) {
      if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
      names.push_back(item.key());
      parameters_.push_back(item.value());
      shared.push_back(from_torch(item.value()));
      trainable.push_back(item.value().requires_grad());
    }
    for (const auto& item : module.named_buffers()) {
      buffer_names.push_back(item.key());
      shared_buffers.push_back(from_torch(item.value()));
    }
    model_ = std::make_shared<Model>(Model::from_tensors(named(names, shared), trainable, named(buffer_names, shared_buffers)));
    state.prepare(*model_, options);
    for (size_t index = 0; index < parameters_.size(); ++index) {
      if (trainable[index]) install_storage(index);
    }
  }
  ModuleModel(const ModuleModel&) = delete;
  ModuleModel& operator=(const ModuleModel&) = delete;

  // Before each forward of the module (grad_enabled false under torch::NoGradGuard): with several processes
  // it may send rank 0's buffers (collective, on every rank alike) and decides whether the coming backward
  // synchronises (accumulate, no_sync).
  void begin_forward(bool grad_enabled = true) { model_->begin_forward(grad_enabled); }

  // Accelerate's backward: (loss / gradient_accumulation_steps).backward(), times the loss scale under fp16
  // (which accel's optimizers and unscale_gradients undo), then end_backward.
  void backward(const at::Tensor& loss) {
    at::Tensor scaled = loss;
    if (const int64_t steps = state_->gradient_accumulation_steps(); steps > 1) scaled = scaled / static_cast<double>(steps);
    if (state_->mixed_precision() == "fp16") scaled = scaled * to_torch(state_->grad_scale());
    scaled.backward();
    end_backward();
  }

  // For a backward the program runs itself (several losses, retain_graph): after it, on a synchronising
  // step, every gradient holds the average over the ranks.
  void end_backward() { model_->end_backward(); }

  // accel's handle on the module's tensors: for accel::Optimizer, clip_grad_norm, save_model, grad_sync_stat, ...
  Model& model() { return *model_; }

 private:
  static std::vector<std::pair<std::string, const Tensor*>> named(const std::vector<std::string>& names,
                                                                  const std::vector<Tensor>& tensors) {
    std::vector<std::pair<std::string, const Tensor*>> out;
    for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], &tensors[i]);
    return out;
  }

  // The parameter's .grad() becomes accel's storage, and its gradient accumulator's post hook marks it
  // ready. A zero_grad that set the gradient to none (torch's default since 2.0) leaves autograd a fresh
  // tensor: the hook copies it into the storage and installs the storage again, as DDP does.
  void install_storage(size_t index) {
    at::Tensor parameter = parameters_[index];
    const at::Tensor storage = to_torch(model_->grad_view(index));
    parameter.mutable_grad() = storage;
    auto accumulator = torch::autograd::impl::grad_accumulator(parameter);
    // The hook holds the model (not this object), so a backward after this object is gone stays safe.
    std::shared_ptr<Model> model = model_;
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [model, parameter, storage, index](const torch::autograd::variable_list& outputs,
                                           const torch::autograd::variable_list&) mutable {
          at::Tensor& grad = parameter.mutable_grad();
          if (!grad.defined() || grad.data_ptr() != storage.data_ptr()) {
            if (grad.defined()) storage.copy_(grad);
            grad = storage;
          }
          model->grad_ready(index);
          return outputs;
        }));
    accumulators_.push_back(std::move(accumulator));  // the parameter holds its accumulator only weakly
  }

  State* state_;
  std::shared_ptr<Model> model_;
  std::vector<at::Tensor> parameters_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace accel
