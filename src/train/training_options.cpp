#include "train/training_options.hpp"

#include <sstream>

namespace accel::train {

namespace {

ResolvedOptions resolved(const OptionScope& scope, const Options* explicit_options) {
  return resolve_options(scope, explicit_options, [](const std::string&) { return std::nullopt; });
}

std::vector<std::string> split_patterns(const std::string& text) {
  std::vector<std::string> patterns;
  std::stringstream stream(text);
  for (std::string pattern; std::getline(stream, pattern, ',');) {
    if (!pattern.empty()) patterns.push_back(pattern);
  }
  return patterns;
}

}  // namespace

const OptionScope& prepare_option_scope() {
  static const OptionScope scope{
      "model",
      "accel_state_prepare_model",
      /*from_environment=*/false,
      {
          {"find_unused_parameters", OptionType::Bool, false, {}, false},
          {"bucket_cap_mb", OptionType::Double, 25.0, {}, true},
          {"first_bucket_mb", OptionType::Double, 1.0, {}, true},
          {"broadcast_buffers", OptionType::Bool, true, {}, false},
          {"convert_outputs_to_fp32", OptionType::Bool, true, {}, false},
      }};
  return scope;
}

const OptionScope& optimizer_option_scope() {
  static const OptionScope scope{
      "optimizer",
      "accel_optimizer_new",
      /*from_environment=*/false,
      {
          {"lr", OptionType::Double, 1e-3, {}, false},
          {"momentum", OptionType::Double, 0.0, {}, false},
          {"dampening", OptionType::Double, 0.0, {}, false},
          {"nesterov", OptionType::Bool, false, {}, false},
          {"weight_decay", OptionType::Double, 0.0, {}, false},
          {"beta1", OptionType::Double, 0.9, {}, false},
          {"beta2", OptionType::Double, 0.999, {}, false},
          {"eps", OptionType::Double, 1e-8, {}, true},
          {"no_decay", OptionType::String, std::string(""), {}, false},
      }};
  return scope;
}

const OptionScope& scheduler_option_scope() {
  static const OptionScope scope{
      "scheduler",
      "accel_scheduler_new",
      /*from_environment=*/false,
      {
          {"warmup_steps", OptionType::Int, int64_t{0}, {}, false},
          {"total_steps", OptionType::Int, int64_t{0}, {}, false},
          {"num_cycles", OptionType::Double, 0.5, {}, false},
          {"step_size", OptionType::Int, int64_t{1}, {}, true},
          {"gamma", OptionType::Double, 0.1, {}, false},
          {"max_lr", OptionType::Double, 0.0, {}, false},
          {"pct_start", OptionType::Double, 0.3, {}, false},
          {"div_factor", OptionType::Double, 25.0, {}, true},
          {"final_div_factor", OptionType::Double, 1e4, {}, true},
          {"split_batches", OptionType::Bool, false, {}, false},
      }};
  return scope;
}

const OptionScope& loss_option_scope() {
  static const OptionScope scope{
      "loss",
      "accel_loss_compute",
      /*from_environment=*/false,
      {
          {"reduction", OptionType::String, std::string("mean"), {"mean", "sum", "none"}, false},
          {"label_smoothing", OptionType::Double, 0.0, {}, false},
          {"ignore_index", OptionType::Int, int64_t{-100}, {}, false},
      }};
  return scope;
}

PrepareConfig prepare_config(const Options* explicit_options) {
  const auto values = resolved(prepare_option_scope(), explicit_options);
  PrepareConfig config;
  config.reducer.find_unused_parameters = values.get_bool("find_unused_parameters");
  config.reducer.bucket_bytes = static_cast<int64_t>(values.get_double("bucket_cap_mb") * 1024 * 1024);
  config.reducer.first_bucket_bytes = static_cast<int64_t>(values.get_double("first_bucket_mb") * 1024 * 1024);
  config.broadcast_buffers = values.get_bool("broadcast_buffers");
  config.keep_low_precision_outputs = !values.get_bool("convert_outputs_to_fp32");
  return config;
}

OptimizerConfig optimizer_config(const Options* explicit_options) {
  const auto values = resolved(optimizer_option_scope(), explicit_options);
  OptimizerConfig config;
  config.lr = values.get_double("lr");
  config.momentum = values.get_double("momentum");
  config.dampening = values.get_double("dampening");
  config.nesterov = values.get_bool("nesterov");
  config.weight_decay = values.get_double("weight_decay");
  config.beta1 = values.get_double("beta1");
  config.beta2 = values.get_double("beta2");
  config.eps = values.get_double("eps");
  config.no_decay_patterns = split_patterns(values.get_string("no_decay"));
  return config;
}

SchedulerConfig scheduler_config(const Options* explicit_options) {
  const auto values = resolved(scheduler_option_scope(), explicit_options);
  SchedulerConfig config;
  config.warmup_steps = values.get_int("warmup_steps");
  config.total_steps = values.get_int("total_steps");
  config.num_cycles = values.get_double("num_cycles");
  config.step_size = values.get_int("step_size");
  config.gamma = values.get_double("gamma");
  config.max_lr = values.get_double("max_lr");
  config.pct_start = values.get_double("pct_start");
  config.div_factor = values.get_double("div_factor");
  config.final_div_factor = values.get_double("final_div_factor");
  config.split_batches = values.get_bool("split_batches");
  return config;
}

LossConfig loss_config(const Options* explicit_options) {
  const auto values = resolved(loss_option_scope(), explicit_options);
  LossConfig config;
  config.reduction = values.get_string("reduction");
  config.label_smoothing = values.get_double("label_smoothing");
  config.ignore_index = values.get_int("ignore_index");
  return config;
}

}  // namespace accel::train
