#include "train/step/train_step.hpp"

#include <ATen/ops/empty.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/options.hpp"
#include "core/timeline.hpp"
#include "core/value_ranges.hpp"
#include "train/optim/capturable_optimizer.hpp"
#include "train/optim/clipping.hpp"
#include "train/step/step_graph.hpp"
#include "train/training_options.hpp"
#include "train/optim/zero_optimizer.hpp"

namespace accel::train {
namespace {

// Optimizer settings other than the lr are constants of a captured step, so each change means a new capture;
// past this many (one_cycle cycling momentum every step), the step stops capturing.
constexpr int kMaxSettingChanges = 3;
constexpr const char* kOutputLoss = "output";

struct Batch {
  std::vector<at::Tensor> inputs;
  NamedTensors named;
  at::Tensor target;  // undefined for the loss "output"
};

// What a captured graph is specific to: each tensor's name, shape and dtype, and the model's mode.
struct Layout {
  std::vector<std::string> entries;
  bool training = true;

  bool operator==(const Layout& other) const { return entries == other.entries && training == other.training; }
  bool operator!=(const Layout& other) const { return !(*this == other); }
  std::string describe() const {
    std::string text;
    for (const auto& entry : entries) text += (text.empty() ? "" : ", ") + entry;
    return text + (training ? "" : " (evaluation mode)");
  }
};

std::string entry(const std::string& name, const at::Tensor& tensor) {
  std::ostringstream out;
  out << name << " " << tensor.sizes() << " " << c10::toString(tensor.scalar_type());
  return out.str();
}

Layout layout_of(const Batch& batch, bool training) {
  Layout layout;
  layout.training = training;
  for (size_t i = 0; i < batch.inputs.size(); ++i) layout.entries.push_back(entry("input " + std::to_string(i), batch.inputs[i]));
  for (const auto& [name, tensor] : batch.named) layout.entries.push_back(entry("input '" + name + "'", tensor));
  if (batch.target.defined()) layout.entries.push_back(entry("target", batch.target));
  return layout;
}

// A batch's tensors on `device`, copied without waiting where they are elsewhere, with the ranges of integer
// targets recorded (the loss then checks them without reading the device).
Batch on_device(const Batch& batch, const c10::Device& device) {
  auto moved = [&](const at::Tensor& tensor) {
    return tensor.device() == device ? tensor : copy_to_device(tensor, device, /*non_blocking=*/true);
  };
  Batch result;
  for (const auto& input : batch.inputs) result.inputs.push_back(moved(input));
  for (const auto& [name, tensor] : batch.named) result.named.emplace_back(name, moved(tensor));
  if (batch.target.defined()) result.target = moved(batch.target);
  return result;
}

// The output entry a loss applies to (a dict's `key`, else the first value).
at::Tensor pick(const ModelOutput& output, const char* key) {
  if (output.values.empty()) fail(Code::InvalidArgument, "train step: the model's forward returned no tensor");
  if (output.kind == ModelOutput::Kind::Dict) {
    for (const auto& [name, tensor] : output.values) {
      if (name == key) return tensor;
    }
  }
  return output.values.front().second;
}

// What one run of the step body leaves.
struct StepResult {
  at::Tensor loss;
  at::Tensor logits;  // undefined for the loss "output"
  at::Tensor found_inf;  // fp16: the overflow flag; undefined otherwise
};

}  // namespace

TrainStepConfig train_step_config(const Options* explicit_options) {
  const auto values = resolve_options(train_step_option_scope(), explicit_options);
  TrainStepConfig config;
  config.loss = values.get_string("loss");
  config.loss_config = loss_config(values);
  config.max_grad_norm = values.get_double("max_grad_norm");
  config.norm_type = values.get_double("norm_type");
  config.cuda_graph = values.get_bool("cuda_graph");
  config.warmup_steps = values.get_int("cuda_graph_warmup");
  return config;
}

struct TrainStep::Impl {
  std::shared_ptr<Model> model;
  std::shared_ptr<AcceleratedOptimizer> optimizer;
  std::shared_ptr<TrainingLoop> training_loop;
  TrainStepConfig config;
  c10::Device device{c10::DeviceType::CPU};
  std::vector<at::Tensor> parameters;  // trainable, in the model's order
  std::string never_captured;  // why no step can be captured ("" while one can)
  std::unique_ptr<StepGraph> graph;

  Batch staged;  // the captured graph's inputs: each batch is copied into them
  Layout staged_layout;
  bool has_staged = false;
  Layout captured_layout;
  std::vector<double> captured_constants;
  int64_t captured_generation = -1;
  StepResult captured;  // the captured graph's outputs, overwritten by each replay
  int64_t warmed_up = 0;
  Layout pending_layout;  // a layout other than the captured one, seen pending_count times in a row
  int64_t pending_count = 0;
  int setting_changes = 0;

  std::string reason = "no step yet";
  std::set<std::string> reported;
  TrainStepStats stats;

  // Runs eagerly for `why`, written to standard error the first time it comes up.
  void note(const std::string& why) {
    reason = why;
    if (config.cuda_graph && reported.insert(why).second) {
      std::fprintf(stderr, "accel: train step runs eagerly: %s\n", why.c_str());
    }
  }

  // The calls an Accelerate loop makes, in its order: the reference every other path is held to.
  at::Tensor eager_step(const Batch& batch) {
    const auto on = on_device(batch, device);
    const auto output = model->forward(on.inputs, on.named, /*grad_enabled=*/true);
    const auto loss = config.loss == kOutputLoss
                          ? pick(output, "loss")
                          : compute_loss(config.loss, pick(output, "logits"), on.target, config.loss_config);
    training_loop->backward(loss);
    if (config.max_grad_norm > 0 && training_loop->state()->sync_gradients()) {
      training_loop->clip_grad_norm(parameters, config.max_grad_norm, config.norm_type);
    }
    optimizer->step();
    optimizer->zero_grad();
    ++stats.eager_steps;
    return loss.detach();
  }

  // The step as a capture records it: no host synchronisation, the optimizer and the scaler on the device.
  StepResult device_body(const Batch& batch, bool capturing) {
    StepResult result;
    const auto output = model->forward(batch.inputs, batch.named, /*grad_enabled=*/true);
    at::Tensor loss;
    if (config.loss == kOutputLoss) {
      loss = pick(output, "loss");
    } else {
      const auto logits = pick(output, "logits");
      result.logits = logits.detach();
      loss = compute_loss(config.loss, logits, batch.target, config.loss_config);
    }
    training_loop->backward(loss);
    auto* scaler = training_loop->scaler();
    if (scaler != nullptr) result.found_inf = scaler->unscale_on_device(parameters);
    if (config.max_grad_norm > 0) clip_grad_norm_on_device(parameters, config.max_grad_norm, config.norm_type);
    optimizer->optimizer().capturable().step(result.found_inf, capturing);
    if (scaler != nullptr) scaler->update_on_device(result.found_inf);
    optimizer->optimizer().zero_grad();
    result.loss = loss.detach();
    return result;
  }

  // device_body outside any graph, on the caller's stream.
  at::Tensor device_step(const Batch& batch) {
    optimizer->optimizer().capturable().refresh();
    const auto result = device_body(on_device(batch, device), /*capturing=*/false);
    finish_device_step(result.found_inf);
    ++stats.eager_steps;
    return result.loss;
  }

  void finish_device_step(const at::Tensor& found_inf) {
    optimizer->record_device_step(found_inf);
    timeline::end_step();
  }

  // Copies the batch into the captured graph's inputs (made for its layout when it has another one).
  void stage(const Batch& batch, const Layout& layout) {
    if (!has_staged || staged_layout != layout) {
      auto like = [&](const at::Tensor& tensor) {
        return at::empty(tensor.sizes(), at::TensorOptions().dtype(tensor.scalar_type()).device(device));
      };
      staged = Batch{};
      for (const auto& input : batch.inputs) staged.inputs.push_back(like(input));
      for (const auto& [name, tensor] : batch.named) staged.named.emplace_back(name, like(tensor));
      if (batch.target.defined()) staged.target = like(batch.target);
      staged_layout = layout;
      has_staged = true;
    }
    for (size_t i = 0; i < batch.inputs.size(); ++i) copy_keeping_range(staged.inputs[i], batch.inputs[i], true);
    for (size_t i = 0; i < batch.named.size(); ++i) copy_keeping_range(staged.named[i].second, batch.named[i].second, true);
    if (!batch.target.defined()) return;
    copy_keeping_range(staged.target, batch.target, true);
    // Class targets whose range nobody recorded are read back once here, outside any capture, where a
    // loss's own check would otherwise break the capture (and cost the same read in a replay).
    if (at::isIntegralType(staged.target.scalar_type(), false) && !known_value_range(staged.target)) {
      if (const auto range = value_range_of(staged.target.cpu())) remember_value_range(staged.target, *range);
    }
  }

  at::Tensor replay(const Batch& batch, const Layout& layout) {
    optimizer->optimizer().capturable().refresh();
    stage(batch, layout);
    // The capture checked its own target; each later one is checked here, from its recorded range.
    if (config.loss != kOutputLoss) check_loss(config.loss, captured.logits, staged.target, config.loss_config);
    {
      const timeline::Span span("train step (CUDA graph replay)");
      graph->replay();
    }
    finish_device_step(captured.found_inf);
    ++stats.replays;
    pending_count = 0;
    reason.clear();
    return captured.loss.clone();
  }

  at::Tensor warm_up(const Batch& batch, const Layout& layout) {
    optimizer->optimizer().capturable().refresh();
    stage(batch, layout);
    StepResult result;
    graph->warm_up([&] { result = device_body(staged, /*capturing=*/false); });
    finish_device_step(result.found_inf);
    ++warmed_up;
    ++stats.warmup_steps;
    reason = "warm-up step " + std::to_string(warmed_up) + " of " + std::to_string(config.warmup_steps) +
             " before the capture";
    return result.loss;
  }

  at::Tensor capture(const Batch& batch, const Layout& layout) {
    auto& capturable = optimizer->optimizer().capturable();
    capturable.refresh();
    stage(batch, layout);
    try {
      graph->capture([&] { captured = device_body(staged, /*capturing=*/true); });
    } catch (const OptimizerStateNotReady& not_ready) {
      optimizer->optimizer().zero_grad();  // what the undone capture left in the grads is no gradient
      note(std::string("not captured yet: ") + not_ready.what());
      return device_step(batch);
    } catch (const std::exception& error) {
      const std::string failure = error.what();
      optimizer->optimizer().zero_grad();
      // The same step run eagerly tells the two failures apart: a bad batch or model fails there too, and
      // its error is the caller's; one that runs is a step that cannot be captured.
      const auto loss = device_step(batch);
      never_captured = "the step cannot be captured as a CUDA graph: " + failure;
      note(never_captured);
      return loss;
    }
    captured_layout = layout;
    captured_constants = capturable.constants();
    captured_generation = optimizer->optimizer().state_generation();
    ++stats.captures;
    std::fprintf(stderr, "accel: train step captured as a CUDA graph (%s); later batches of that layout replay it\n",
                 layout.describe().c_str());
    return replay(batch, layout);
  }

  at::Tensor graph_step(const Batch& batch) {
    auto& capturable = optimizer->optimizer().capturable();
    const Layout layout = layout_of(batch, model->is_training());
    if (graph->captured()) {
      const bool settings_changed = capturable.constants() != captured_constants;
      if (settings_changed || optimizer->optimizer().state_generation() != captured_generation) {
        graph->reset();
        if (settings_changed && ++setting_changes > kMaxSettingChanges) {
          never_captured = "optimizer settings other than the learning rate changed " + std::to_string(setting_changes) +
                           " times (one_cycle cycles momentum every step): each change needs a new capture";
          note(never_captured);
          return eager_step(batch);
        }
        return capture(batch, layout);
      }
      if (layout == captured_layout) return replay(batch, layout);
      pending_count = layout == pending_layout ? pending_count + 1 : 1;
      pending_layout = layout;
      if (pending_count <= config.warmup_steps) {
        note("the batch (" + layout.describe() + ") differs from the captured one (" + captured_layout.describe() + ")");
        return device_step(batch);
      }
      graph->reset();  // the new layout has lasted: it gets the graph
      return capture(batch, layout);
    }
    if (warmed_up < config.warmup_steps) return warm_up(batch, layout);
    return capture(batch, layout);
  }

  // Why this step runs eagerly whatever the batch ("" when it need not).
  std::string eager_only() const {
    if (!never_captured.empty()) return never_captured;
    const size_t optimizers = training_loop->optimizer_count();
    if (optimizers > 1) {
      return std::to_string(optimizers) + " optimizers are prepared on this state, and a captured step steps only its own";
    }
    return "";
  }
};

TrainStep::TrainStep(std::shared_ptr<Model> model, std::shared_ptr<AcceleratedOptimizer> optimizer, TrainStepConfig config)
    : impl_(std::make_unique<Impl>()) {
  require_argument(model != nullptr && optimizer != nullptr, "train step: a model and an optimizer are needed");
  if (!model->prepared()) fail(Code::InvalidState, "train step: prepare the model (accel_state_prepare_model) first");
  if (model->host_owned()) {
    fail(Code::Unsupported, "train step: a train step runs the model's forward and backward, and this model's run "
                            "in the caller's runtime (its tensors are the caller's)");
  }
  require_argument(config.max_grad_norm >= 0, "train step: max_grad_norm must be >= 0 (0: no clipping), got " +
                                                  format_number(config.max_grad_norm));
  require_argument(config.norm_type > 0, "train step: norm_type must be > 0 or inf, got " + format_number(config.norm_type));
  require_argument(config.warmup_steps >= 1,
                   "train step: cuda_graph_warmup must be >= 1, got " + std::to_string(config.warmup_steps));
  auto& impl = *impl_;
  for (const auto& parameter : model->trainable_parameters()) impl.parameters.push_back(parameter.second);
  std::set<const c10::TensorImpl*> trainable;
  for (const auto& parameter : impl.parameters) trainable.insert(parameter.unsafeGetTensorImpl());
  if (config.cuda_graph && optimizer->optimizer().zero_shard() != nullptr) {
    fail(Code::Unsupported, "train step: cuda_graph with a model prepared with zero_stage " +
                                std::to_string(optimizer->optimizer().zero_shard()->stage()) +
                                " (the step's all-gather cannot be captured); use zero_stage 0 or cuda_graph off");
  }
  const auto optimized = optimizer->optimizer().parameters();
  std::set<const c10::TensorImpl*> stepped;
  for (const auto& parameter : optimized) stepped.insert(parameter.unsafeGetTensorImpl());
  require_argument(stepped == trainable, "train step: the optimizer was not made from this model's parameters");
  if (config.loss != kOutputLoss) {
    check_loss_settings(config.loss, config.loss_config);
    require_argument(config.loss_config.reduction != "none",
                     "train step: the loss must be one number to take its backward: reduction mean or sum, not none");
  }
  impl.device = impl.parameters.empty() ? c10::Device(model->state()->device()) : impl.parameters.front().device();
  impl.model = std::move(model);
  impl.training_loop = optimizer->training_loop();
  impl.optimizer = std::move(optimizer);
  impl.config = std::move(config);

  const auto& state = *impl.training_loop->state();
  if (!impl.config.cuda_graph) {
    impl.never_captured = "cuda_graph is off";
  } else if (const auto why = StepGraph::unavailable(impl.device)) {
    impl.never_captured = *why;
  } else if (state.launch().world_size > 1) {
    impl.never_captured = "several processes: the gradient all-reduce is not captured (a captured step runs on one "
                          "process; " + std::to_string(state.launch().world_size) + " here)";
  } else if (impl.training_loop->gradient_accumulation_steps() > 1) {
    impl.never_captured = "gradient_accumulation_steps is " + std::to_string(impl.training_loop->gradient_accumulation_steps()) +
                          ": micro-batches that only accumulate, and the steps whose gradients they made, run eagerly";
  } else {
    impl.graph = std::make_unique<StepGraph>(impl.device);
  }
}

TrainStep::~TrainStep() = default;

at::Tensor TrainStep::run(const std::vector<at::Tensor>& inputs, const NamedTensors& named_inputs, const at::Tensor& target) {
  auto& impl = *impl_;
  impl.training_loop->before_training();
  for (size_t i = 0; i < inputs.size(); ++i) {
    require_argument(inputs[i].defined(), "train step: input " + std::to_string(i) + " is an undefined tensor");
  }
  for (const auto& [name, tensor] : named_inputs) {
    require_argument(tensor.defined(), "train step: input '" + name + "' is an undefined tensor");
  }
  if (impl.config.loss != kOutputLoss) {
    require_argument(target.defined(), "train step: the loss '" + impl.config.loss + "' needs a target");
  }
  const Batch batch{inputs, named_inputs, impl.config.loss == kOutputLoss ? at::Tensor() : target};
  impl.training_loop->accumulate();
  const auto eager_only = impl.eager_only();
  if (!eager_only.empty()) impl.note(eager_only);
  const at::Tensor loss = eager_only.empty() ? impl.graph_step(batch) : impl.eager_step(batch);
  // Counted once it has run: a step that failed is no step.
  ++impl.stats.steps;
  return loss;
}

const std::string& TrainStep::eager_reason() const { return impl_->reason; }

TrainStepStats TrainStep::stats() const { return impl_->stats; }

double train_step_figure(const TrainStepStats& stats, const std::string& name) {
  const std::pair<const char*, int64_t> figures[] = {{"steps", stats.steps},
                                                     {"replays", stats.replays},
                                                     {"captures", stats.captures},
                                                     {"warmup_steps", stats.warmup_steps},
                                                     {"eager_steps", stats.eager_steps}};
  std::string known;
  for (const auto& [figure, value] : figures) {
    if (name == figure) return static_cast<double>(value);
    known += std::string(known.empty() ? "" : ", ") + figure;
  }
  fail(Code::InvalidArgument, "no train step figure '" + name + "': the figures are " + known);
}

}  // namespace accel::train
