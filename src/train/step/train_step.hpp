// A training step as one call: forward, loss, backward, gradient clipping, the optimizer step and zero_grad
// for a batch. Eagerly it makes the calls an Accelerate loop makes (accumulate, forward, loss, backward,
// clip_grad_norm on sync steps, step, zero_grad), to the same results. With cuda_graph on a CUDA device it
// runs a few warm-up steps on a side stream, captures the whole step (the fp16 scaler's unscale, inf check
// and update included) as one CUDA graph, and replays it for every later batch of the same shapes: the
// batch is copied into the captured input tensors, the learning rates are written to the device when they
// change, and nothing is read back from the device.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/named_tensors.hpp"
#include "core/options.hpp"
#include "train/loss/losses.hpp"
#include "train/model/model.hpp"
#include "train/training_loop.hpp"

namespace accel::train {

struct TrainStepConfig {
  // A loss of train/loss/losses.hpp applied to the model's output (a dict's "logits" entry, else its first
  // value) and the target; or "output": the model's output is the loss (a dict's "loss", else its first
  // value) and there is no target.
  std::string loss = "cross_entropy";
  LossConfig loss_config;
  double max_grad_norm = 0;  // > 0: clip_grad_norm on every sync step
  double norm_type = 2.0;
  bool cuda_graph = false;
  int64_t warmup_steps = 3;  // eager steps on the side stream before the capture
};

// The settings of explicit_options (NULL: the defaults) against the train step's keys, the loss keys among
// them (train_step_option_scope, training_options.hpp). Throws Error(UnknownOption) for another object's
// key (naming where it belongs), Error(BadOptionValue).
TrainStepConfig train_step_config(const Options* explicit_options);

struct TrainStepStats {
  int64_t steps = 0;
  int64_t replays = 0;  // steps that replayed a captured graph (the step of a capture counts too)
  int64_t captures = 0;
  int64_t warmup_steps = 0;
  int64_t eager_steps = 0;  // steps that neither replayed nor warmed up
};

// One of the stats by name: steps, replays, captures, warmup_steps, eager_steps. Another name:
// Error(InvalidArgument) listing them.
double train_step_figure(const TrainStepStats& stats, const std::string& name);

class TrainStep {
 public:
  // The model prepared, the optimizer made from it (Error(InvalidArgument) otherwise); max_grad_norm < 0,
  // norm_type <= 0, warmup_steps < 1, an unknown loss: Error(InvalidArgument).
  TrainStep(std::shared_ptr<Model> model, std::shared_ptr<AcceleratedOptimizer> optimizer, TrainStepConfig config);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // One step on a batch (host or device tensors; they are copied to the model's device). Returns the
  // loss, detached, a tensor of its own. target is ignored (may be undefined) for the loss "output".
  // Errors: the training loop's pending report (TrainingLoop::before_training: a background save's failure),
  // those of forward, the loss and backward, before any parameter changes.
  at::Tensor run(const std::vector<at::Tensor>& inputs, const NamedTensors& named_inputs, const at::Tensor& target);

  // Why the last step did not replay a graph ("" when it did); the reason a step first runs eagerly for is
  // also written to standard error once.
  const std::string& eager_reason() const;
  TrainStepStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::train
