// The training loop: the training half of Accelerate's Accelerator (the whole one is accel::Accelerator,
// accelerator/accelerator.hpp's, which owns this): gradient accumulation and
// sync_gradients, backward with loss division and fp16 loss scaling, the accelerated optimizer and
// scheduler (their steps follow sync_gradients and skipped fp16 steps), and gradient clipping.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "distributed/state.hpp"
#include "train/model/model.hpp"
#include "train/optim/optimizer.hpp"
#include "train/optim/grad_scaler.hpp"
#include "train/schedule/scheduler.hpp"

namespace accel::train {

class AcceleratedOptimizer;
class ZeroShard;

class TrainingLoop {
 public:
  // Reads the state's accumulation and fp16 scaler options. Several may share a state (each its own
  // scaler and optimizers, as two Accelerate Accelerators in one process).
  explicit TrainingLoop(std::shared_ptr<distributed::State> state);

  const std::shared_ptr<distributed::State>& state() const { return state_; }
  int64_t gradient_accumulation_steps() const { return accumulation_steps_; }
  // Accelerate's `accelerator.gradient_accumulation_steps = n`: from the next accumulate() on. Throws
  // Error(InvalidArgument) for n < 1.
  void set_gradient_accumulation_steps(int64_t steps);

  // Accelerate's accumulate(model): decides whether this step synchronises (see GradientState::do_sync).
  void accumulate();
  // loss / gradient_accumulation_steps, scaled under fp16, then backward. Throws Error(InvalidArgument)
  // for a loss that is not a scalar or does not require grad.
  void backward(const at::Tensor& loss);
  // For a loss summed over this micro-batch's items (tokens), num_items being the items of the whole
  // accumulated global batch (every micro-batch of the optimizer step, on every rank): backward of
  // loss * num_processes / num_items, so that once the reducer averages over the ranks the gradient is
  // that of the full batch's mean, however unevenly the items fall. num_items 0: Error(InvalidArgument);
  // otherwise as backward.
  void backward_with_items(const at::Tensor& loss, size_t num_items);
  // Accelerate's no_sync(model) as a pair: between them the model's backwards accumulate locally (no
  // all-reduce); the next synchronising backward after end averages the sum. A model prepared with another
  // state (or not at all): Error(InvalidArgument); begin twice, or end without begin: Error(InvalidState).
  void no_sync_begin(Model& model);
  void no_sync_end(Model& model);
  // Accelerate's free_memory for what the state holds: the accumulation counter restarts (sync_gradients
  // true), loaders in an epoch are no longer tracked (gather_for_metrics trims nothing until a loader
  // starts its next epoch), and the CUDA caching allocator returns its unused blocks. The objects the
  // caller holds stay usable.
  void free_memory();

  // Unscales fp16 gradients (of the optimizers holding the parameters, once per step; Accelerate unscales
  // every optimizer), then clips like torch.nn.utils; returns the total norm.
  // Clipping and optimizer steps throw Error(InvalidState) once the process group is broken.
  double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type);
  void clip_grad_value(const std::vector<at::Tensor>& parameters, double clip_value);
  // The same over the model's trainable parameters.
  double clip_grad_norm(const Model& model, double max_norm, double norm_type);
  void clip_grad_value(const Model& model, double clip_value);

  // What its owner has to report before training goes on (a background save's failure): run at the start
  // of backward, of an optimizer step and of each train step (train_step.hpp); may throw. Set before training, from one thread.
  void set_before_training(std::function<void()> check) { before_training_ = std::move(check); }
  void before_training() const {
    if (before_training_) before_training_();
  }

  GradScaler* scaler() { return scaler_.get(); }
  // The grad scaler for gradients whose optimizer is not accel's (a model of the caller's tensors):
  // the loss scale as a 0-dim float32 tensor on the state's device (a tensor of 1 without fp16 loss
  // scaling); the model's gradients unscaled, returning whether any was inf or NaN (false without
  // scaling); the update rule after a step taken or skipped (nothing without scaling).
  at::Tensor grad_scale();
  bool unscale_gradients(const Model& model);
  void update_grad_scale(bool found_inf);
  // The prepared optimizers of this state, any number of them (a GAN's two), each tracked by the scaler.
  void add_optimizer(AcceleratedOptimizer* optimizer);
  void remove_optimizer(AcceleratedOptimizer* optimizer);
  bool optimizer_step_was_skipped() const;
  size_t optimizer_count() const;

 private:
  void backward_divided(const at::Tensor& loss, double divisor);
  // Unscales, under fp16, each optimizer that holds one of `parameters` and is not unscaled yet this step.
  void unscale_owners(const std::vector<at::Tensor>& parameters);
  void refuse_if_group_broken(const char* what) const;
  ZeroShard* split_gradients_of(const std::vector<at::Tensor>& parameters) const;
  void require_own(const Model& model, const char* what) const;

  std::shared_ptr<distributed::State> state_;
  int64_t accumulation_steps_;
  std::unique_ptr<GradScaler> scaler_;
  mutable std::mutex mutex_;
  std::vector<AcceleratedOptimizer*> optimizers_;
  std::function<void()> before_training_;
  friend class AcceleratedOptimizer;
};

// Accelerate's AcceleratedOptimizer: step and zero_grad act only on sync steps; under fp16 the step is
// skipped (and reported) when a gradient overflowed. step first runs the training loop's before_training
// (its failure is step's), and throws Error(InvalidState) once the process group is broken.
class AcceleratedOptimizer {
 public:
  AcceleratedOptimizer(std::shared_ptr<TrainingLoop> training_loop, std::unique_ptr<Optimizer> optimizer);
  ~AcceleratedOptimizer();
  void step();
  void zero_grad();
  // Whether the last step was skipped (an fp16 overflow). After record_device_step this reads the device.
  bool step_was_skipped() const;
  // A step this optimizer's parameters took on the device without step() (a captured CUDA graph's):
  // found_inf is its 0-dim bool overflow flag (undefined: no grad scaler), read only when asked.
  void record_device_step(const at::Tensor& found_inf);
  // The fp16 loss scale, 1 without fp16 (reading it waits for the device).
  double loss_scale() const;
  Optimizer& optimizer() { return *optimizer_; }
  const std::shared_ptr<TrainingLoop>& training_loop() const { return training_loop_; }

 private:
  std::shared_ptr<TrainingLoop> training_loop_;
  std::unique_ptr<Optimizer> optimizer_;
  mutable bool skipped_ = false;
  mutable at::Tensor device_found_inf_;  // a recorded device step's flag, until read
};

// Accelerate's AcceleratedScheduler: steps only after a real optimizer step, P times unless split_batches;
// once per call when the state's step_scheduler_with_optimizer is off.
class AcceleratedScheduler {
 public:
  AcceleratedScheduler(std::shared_ptr<AcceleratedOptimizer> optimizer, std::unique_ptr<Scheduler> scheduler,
                       bool split_batches);
  void step(std::optional<double> metric = std::nullopt);  // a metric: reduce_on_plateau's step(metric)
  Scheduler& scheduler() { return *scheduler_; }

 private:
  std::shared_ptr<AcceleratedOptimizer> optimizer_;
  std::unique_ptr<Scheduler> scheduler_;
  bool split_batches_;
  bool step_with_optimizer_;
};

// Accelerate's prepare(optimizer): an optimizer of kind over the trainable parameters of a model prepared
// with the training loop's state. Throws Error(InvalidState) when the model is not prepared (training_loop null
// or the model without a state), Error(InvalidArgument) when it was prepared with another state, and the
// Optimizer's errors.
std::shared_ptr<AcceleratedOptimizer> prepare_optimizer(const std::shared_ptr<TrainingLoop>& training_loop, const Model& model,
                                                        const std::string& kind, const OptimizerConfig& config);
// prepare(optimizer) for the caller's own optimizer (torch's, in Python): an optimizer whose steps `step`
// takes (OptimizerConfig::external_step) over the elements Optimizer::owned_elements lists, reading their
// gradients where the caller's tensors hold them; so the model must be one of the caller's tensors
// (Model::from_tensors), otherwise Error(InvalidArgument). Otherwise prepare_optimizer's errors.
std::shared_ptr<AcceleratedOptimizer> prepare_external_optimizer(const std::shared_ptr<TrainingLoop>& training_loop,
                                                                 const Model& model, std::function<void()> step);
// Accelerate's prepare(scheduler), for a named schedule or a multiplier function (LambdaLR).
std::unique_ptr<AcceleratedScheduler> prepare_scheduler(std::shared_ptr<AcceleratedOptimizer> optimizer,
                                                        const std::string& name, const SchedulerConfig& config);
std::unique_ptr<AcceleratedScheduler> prepare_scheduler(std::shared_ptr<AcceleratedOptimizer> optimizer,
                                                        std::function<double(int64_t step)> multiplier);

}  // namespace accel::train
