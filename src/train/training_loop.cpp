#include "train/training_loop.hpp"

#include <ATen/ops/ones.h>

#include <algorithm>
#include <set>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"
#include "train/optim/clipping.hpp"
#include "train/optim/zero_optimizer.hpp"

namespace accel::train {

TrainingLoop::TrainingLoop(std::shared_ptr<distributed::State> state)
    : state_(std::move(state)), accumulation_steps_(state_->options().get_int("gradient_accumulation_steps")) {
  const auto& options = state_->options();
  // GradScalerKwargs(enabled=False): fp16 autocast without loss scaling.
  if (options.get_string("mixed_precision") == "fp16" && options.get_bool("grad_scaler_enabled")) {
    GradScalerConfig config;
    config.init_scale = options.get_double("init_scale");
    config.growth_factor = options.get_double("growth_factor");
    config.backoff_factor = options.get_double("backoff_factor");
    config.growth_interval = options.get_int("growth_interval");
    scaler_ = std::make_unique<GradScaler>(config);
  }
}

void TrainingLoop::set_gradient_accumulation_steps(int64_t steps) {
  require_argument(steps >= 1, "gradient_accumulation_steps must be at least 1, got " + std::to_string(steps));
  accumulation_steps_ = steps;
}

void TrainingLoop::accumulate() {
  state_->gradient_state().do_sync(accumulation_steps_, state_->options().get_bool("sync_with_dataloader"));
}

void TrainingLoop::backward(const at::Tensor& loss) {
  // Every micro-batch contributes loss / N, synced or not (Accelerate divides on every call).
  backward_divided(loss, static_cast<double>(accumulation_steps_));
}

void TrainingLoop::backward_with_items(const at::Tensor& loss, size_t num_items) {
  require_argument(num_items > 0, "backward: the number of items must be > 0");
  // The reducer divides the summed gradients by the number of processes: multiplying by it here leaves
  // sum over every rank's micro-batches / num_items, the full batch's mean.
  backward_divided(loss, static_cast<double>(num_items) / static_cast<double>(state_->launch().world_size));
}

void TrainingLoop::backward_divided(const at::Tensor& loss, double divisor) {
  before_training();
  const timeline::Span span("backward");
  if (!loss.defined()) fail(Code::InvalidArgument, "backward: the loss is undefined");
  if (loss.numel() != 1) {
    fail(Code::InvalidArgument, "backward: the loss must be a scalar, got shape " + c10::str(loss.sizes()));
  }
  if (!loss.requires_grad()) {
    fail(Code::InvalidArgument, "backward: the loss does not require grad (computed without a graph?)");
  }
  // A divisor of 1 and a loss that is 0-dimensional already need no extra node in the graph: each node
  // costs host time in backward, which on a GPU is most of a small model's step.
  at::Tensor scaled = loss.dim() == 0 ? loss : loss.reshape({});
  if (divisor != 1.0) scaled = scaled.div(divisor);
  if (scaler_) scaled = scaler_->scale(scaled);
  scaled.backward();
}

void TrainingLoop::require_own(const Model& model, const char* what) const {
  if (model.state() != state_) {
    fail(Code::InvalidArgument, std::string(what) + ": the model is not prepared with this state (accel_state_prepare_model)");
  }
}

void TrainingLoop::no_sync_begin(Model& model) {
  require_own(model, "no_sync begin");
  if (model.no_sync()) fail(Code::InvalidState, "no_sync begin: the model is already in a no_sync scope");
  model.set_no_sync(true);
}

void TrainingLoop::no_sync_end(Model& model) {
  require_own(model, "no_sync end");
  if (!model.no_sync()) fail(Code::InvalidState, "no_sync end: the model is not in a no_sync scope");
  model.set_no_sync(false);
}

void TrainingLoop::free_memory() {
  state_->gradient_state().reset();
  release_cached_device_memory();
}

at::Tensor TrainingLoop::grad_scale() {
  const c10::Device device(state_->device());
  if (!scaler_) return at::ones({}, at::TensorOptions().dtype(at::kFloat).device(device));
  return scaler_->scale_tensor(device);
}

bool TrainingLoop::unscale_gradients(const Model& model) {
  if (!scaler_) return false;
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : model.trainable_parameters()) parameters.push_back(parameter.second);
  ZeroShard* shard = split_gradients_of(parameters);
  if (shard == nullptr) return scaler_->unscale_parameters(parameters);
  return shard->any_rank(scaler_->unscale_parameters(shard->gradient_pieces(parameters)));
}

// The ZeRO stage 2 or 3 split that holds these parameters' gradients in pieces, if any.
ZeroShard* TrainingLoop::split_gradients_of(const std::vector<at::Tensor>& parameters) const {
  if (parameters.empty()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto* accelerated : optimizers_) {
    ZeroShard* shard = accelerated->optimizer().zero_shard();
    if (shard != nullptr && shard->stage() >= 2 && shard->holds(parameters.front())) return shard;
  }
  return nullptr;
}

void TrainingLoop::update_grad_scale(bool found_inf) {
  if (scaler_) scaler_->update_after(found_inf);
}

// Unscaling every optimizer, as Accelerate does, would unscale another model's gradients before its own
// backward has added the scaled ones (a GAN clipping its discriminator).
void TrainingLoop::unscale_owners(const std::vector<at::Tensor>& parameters) {
  if (!scaler_) return;
  std::set<const c10::TensorImpl*> wanted;
  for (const auto& parameter : parameters) wanted.insert(parameter.unsafeGetTensorImpl());
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto* accelerated : optimizers_) {
    auto& optimizer = accelerated->optimizer();
    if (!scaler_->ready(optimizer)) continue;
    const auto owned = optimizer.parameters();
    if (std::any_of(owned.begin(), owned.end(), [&](const at::Tensor& p) { return wanted.count(p.unsafeGetTensorImpl()) != 0; })) {
      scaler_->unscale(optimizer);
    }
  }
}

// A broken group may have averaged some gradient buckets over the ranks and not others (or none): a step
// on them would move this rank's model away from the others' for good.
void TrainingLoop::refuse_if_group_broken(const char* what) const {
  if (state_->broken()) {
    fail(Code::InvalidState, std::string(what) +
                                 " refused: the gradients may not be averaged over the processes, since the "
                                 "process group broke: " +
                                 state_->group_failure());
  }
}

double TrainingLoop::clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) {
  refuse_if_group_broken("clip_grad_norm");
  unscale_owners(parameters);
  // Under ZeRO stage 2 a rank holds the gradients of its own pieces only: the norm is shared.
  if (ZeroShard* shard = split_gradients_of(parameters)) return shard->clip_grad_norm(parameters, max_norm, norm_type);
  return train::clip_grad_norm(parameters, max_norm, norm_type);
}

void TrainingLoop::clip_grad_value(const std::vector<at::Tensor>& parameters, double clip_value) {
  refuse_if_group_broken("clip_grad_value");
  unscale_owners(parameters);
  ZeroShard* shard = split_gradients_of(parameters);
  train::clip_grad_value(shard != nullptr ? shard->gradient_pieces(parameters) : parameters, clip_value);
}

void TrainingLoop::add_optimizer(AcceleratedOptimizer* optimizer) {
  std::lock_guard<std::mutex> lock(mutex_);
  optimizers_.push_back(optimizer);
}

void TrainingLoop::remove_optimizer(AcceleratedOptimizer* optimizer) {
  std::lock_guard<std::mutex> lock(mutex_);
  optimizers_.erase(std::remove(optimizers_.begin(), optimizers_.end(), optimizer), optimizers_.end());
  if (scaler_) scaler_->forget(optimizer->optimizer());
}

size_t TrainingLoop::optimizer_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return optimizers_.size();
}

bool TrainingLoop::optimizer_step_was_skipped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::any_of(optimizers_.begin(), optimizers_.end(), [](const auto* o) { return o->step_was_skipped(); });
}

AcceleratedOptimizer::AcceleratedOptimizer(std::shared_ptr<TrainingLoop> training_loop, std::unique_ptr<Optimizer> optimizer)
    : training_loop_(std::move(training_loop)), optimizer_(std::move(optimizer)) {
  training_loop_->add_optimizer(this);
}

AcceleratedOptimizer::~AcceleratedOptimizer() { training_loop_->remove_optimizer(this); }

void AcceleratedOptimizer::step() {
  training_loop_->before_training();
  training_loop_->refuse_if_group_broken("optimizer step");
  if (!training_loop_->state()->sync_gradients()) return;
  {
    const timeline::Span span("optimizer step");
    GradScaler* scaler = training_loop_->scaler();
    if (scaler == nullptr) {
      optimizer_->step();
    } else {
      // As Accelerate's AcceleratedOptimizer: each optimizer's step updates the scale.
      device_found_inf_ = at::Tensor();
      skipped_ = scaler->step(*optimizer_);
      scaler->update(*optimizer_);
    }
  }
  timeline::end_step();  // a step of the trace's ring ends with each real optimizer step
}

bool AcceleratedOptimizer::step_was_skipped() const {
  if (device_found_inf_.defined()) {
    skipped_ = device_found_inf_.item<bool>();
    device_found_inf_ = at::Tensor();
  }
  return skipped_;
}

void AcceleratedOptimizer::record_device_step(const at::Tensor& found_inf) {
  skipped_ = false;
  device_found_inf_ = found_inf;
}

void AcceleratedOptimizer::zero_grad() {
  if (training_loop_->state()->sync_gradients()) optimizer_->zero_grad();
}

AcceleratedScheduler::AcceleratedScheduler(std::shared_ptr<AcceleratedOptimizer> optimizer,
                                           std::unique_ptr<Scheduler> scheduler, bool split_batches)
    : optimizer_(std::move(optimizer)),
      scheduler_(std::move(scheduler)),
      split_batches_(split_batches),
      step_with_optimizer_(optimizer_->training_loop()->state()->options().get_bool("step_scheduler_with_optimizer")) {}

void AcceleratedScheduler::step(std::optional<double> metric) {
  const auto& state = optimizer_->training_loop()->state();
  accelerated_scheduler_step(*scheduler_, state->sync_gradients(), optimizer_->step_was_skipped(), split_batches_,
                             state->launch().world_size, metric, step_with_optimizer_);
}

double AcceleratedOptimizer::loss_scale() const {
  const auto* scaler = training_loop_->scaler();
  return scaler != nullptr ? scaler->get_scale() : 1.0;
}

double TrainingLoop::clip_grad_norm(const Model& model, double max_norm, double norm_type) {
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : model.trainable_parameters()) parameters.push_back(parameter.second);
  return clip_grad_norm(parameters, max_norm, norm_type);
}

void TrainingLoop::clip_grad_value(const Model& model, double clip_value) {
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : model.trainable_parameters()) parameters.push_back(parameter.second);
  clip_grad_value(parameters, clip_value);
}

namespace {

void require_prepared_here(const std::shared_ptr<TrainingLoop>& training_loop, const Model& model) {
  if (!training_loop || !model.state()) {
    fail(Code::InvalidState, "prepare the model (accel_state_prepare_model) before making its optimizer");
  }
  if (model.state() != training_loop->state()) {
    fail(Code::InvalidArgument, "prepare optimizer: the model is prepared with another state than this accelerator's");
  }
}

}  // namespace

std::shared_ptr<AcceleratedOptimizer> prepare_optimizer(const std::shared_ptr<TrainingLoop>& training_loop, const Model& model,
                                                        const std::string& kind, const OptimizerConfig& config) {
  require_prepared_here(training_loop, model);
  auto settings = config;
  // A model of the caller's tensors keeps its gradient storage: the caller's tensors hold it as their grads.
  if (model.host_owned()) settings.zero_grad_to_none = false;
  auto optimizer = std::make_unique<Optimizer>(kind, model.trainable_parameters(), settings);
  shard_for_zero(model, *optimizer);
  auto accelerated = std::make_shared<AcceleratedOptimizer>(training_loop, std::move(optimizer));
  model.note_accel_optimizer([held = std::weak_ptr<AcceleratedOptimizer>(accelerated)] {
    const auto optimizer = held.lock();
    return optimizer ? optimizer->optimizer().state_bytes() : int64_t{0};
  });
  return accelerated;
}

std::shared_ptr<AcceleratedOptimizer> prepare_external_optimizer(const std::shared_ptr<TrainingLoop>& training_loop,
                                                                 const Model& model, std::function<void()> step) {
  require_prepared_here(training_loop, model);
  if (!model.host_owned()) {
    fail(Code::InvalidArgument, "an optimizer stepped by the caller's own needs a model of the caller's tensors "
                                "(accel_model_from_tensors), whose gradients the caller reads where its tensors "
                                "hold them; this model's tensors are accel's");
  }
  OptimizerConfig config;
  config.external_step = std::move(step);
  // The kind only carries group options for an optimizer whose state is the caller's.
  return prepare_optimizer(training_loop, model, "sgd", config);
}

std::unique_ptr<AcceleratedScheduler> prepare_scheduler(std::shared_ptr<AcceleratedOptimizer> optimizer,
                                                        const std::string& name, const SchedulerConfig& config) {
  auto scheduler = std::make_unique<Scheduler>(optimizer->optimizer(), name, config);
  return std::make_unique<AcceleratedScheduler>(std::move(optimizer), std::move(scheduler), config.split_batches);
}

std::unique_ptr<AcceleratedScheduler> prepare_scheduler(std::shared_ptr<AcceleratedOptimizer> optimizer,
                                                        std::function<double(int64_t step)> multiplier) {
  auto scheduler = std::make_unique<Scheduler>(optimizer->optimizer(), std::move(multiplier));
  return std::make_unique<AcceleratedScheduler>(std::move(optimizer), std::move(scheduler), /*split_batches=*/false);
}

}  // namespace accel::train
