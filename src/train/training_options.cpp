#include "train/training_options.hpp"

#include "train/step/train_step.hpp"

#include <sstream>

#include "core/error.hpp"

namespace accel::train {

namespace {

ResolvedOptions resolved(const OptionScope& scope, const Options* explicit_options) {
  return resolve_options(scope, explicit_options, [](const std::string&) { return std::nullopt; });
}

// "30, 80" -> {30, 80}: integers separated by commas, spaces around them allowed.
std::vector<int64_t> parse_milestones(const std::string& text) {
  std::vector<int64_t> milestones;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    std::stringstream number(item);
    int64_t milestone = 0;
    std::string rest;
    if (!(number >> milestone) || (number >> rest)) {
      fail(Code::BadOptionValue, "option milestones: '" + text + "' is not a comma-separated list of steps (e.g. \"30,80\")");
    }
    milestones.push_back(milestone);
  }
  return milestones;
}

// The loss keys, which the loss scope and the train step scope share.
LossConfig loss_config_of(const ResolvedOptions& values) {
  LossConfig config;
  config.reduction = values.get_string("reduction");
  config.label_smoothing = values.get_double("label_smoothing");
  config.ignore_index = values.get_int("ignore_index");
  return config;
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
          {"gradient_as_bucket_view", OptionType::Bool, false, {}, false},
          {"static_graph", OptionType::Bool, false, {}, false},
          {"convert_outputs_to_fp32", OptionType::Bool, true, {}, false},
          {"grad_compression", OptionType::String, std::string("no"), {"no", "fp16", "bf16"}, false},
          {"zero_stage", OptionType::Int, int64_t{0}, {}, false},
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
  static const std::vector<std::string> ramps{"linear", "cosine", "1-sqrt"};
  static const OptionScope scope{
      "scheduler",
      "accel_scheduler_new",
      /*from_environment=*/false,
      {
          {"warmup_steps", OptionType::Int, int64_t{0}, {}, false},
          {"total_steps", OptionType::Int, int64_t{0}, {}, false},
          {"num_cycles", OptionType::Double, 0.5, {}, false},
          {"power", OptionType::Double, 1.0, {}, false},
          {"lr_end", OptionType::Double, 1e-7, {}, false},
          {"timescale", OptionType::Int, int64_t{0}, {}, false},
          {"min_lr", OptionType::Double, 0.0, {}, false},
          {"min_lr_rate", OptionType::Double, 0.0, {}, false},
          {"num_stable_steps", OptionType::Int, int64_t{0}, {}, false},
          {"num_decay_steps", OptionType::Int, int64_t{0}, {}, false},
          {"min_lr_ratio", OptionType::Double, 0.0, {}, false},
          {"warmup_type", OptionType::String, std::string("linear"), ramps, false},
          {"decay_type", OptionType::String, std::string("cosine"), ramps, false},
          {"step_size", OptionType::Int, int64_t{1}, {}, true},
          {"gamma", OptionType::Double, 0.1, {}, false},
          {"milestones", OptionType::String, std::string(""), {}, false},
          {"max_lr", OptionType::Double, 0.0, {}, false},
          {"pct_start", OptionType::Double, 0.3, {}, false},
          {"anneal_strategy", OptionType::String, std::string("cos"), {"cos", "linear"}, false},
          {"cycle_momentum", OptionType::Bool, true, {}, false},
          {"base_momentum", OptionType::Double, 0.85, {}, false},
          {"max_momentum", OptionType::Double, 0.95, {}, false},
          {"div_factor", OptionType::Double, 25.0, {}, true},
          {"final_div_factor", OptionType::Double, 1e4, {}, true},
          {"three_phase", OptionType::Bool, false, {}, false},
          {"mode", OptionType::String, std::string("min"), {"min", "max"}, false},
          {"factor", OptionType::Double, 0.1, {}, false},
          {"patience", OptionType::Int, int64_t{10}, {}, false},
          {"threshold", OptionType::Double, 1e-4, {}, false},
          {"threshold_mode", OptionType::String, std::string("rel"), {"rel", "abs"}, false},
          {"cooldown", OptionType::Int, int64_t{0}, {}, false},
          // Shared with the optimizer's eps, so one spec (core/options.hpp): > 0.
          {"eps", OptionType::Double, 1e-8, {}, true},
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

const OptionScope& train_step_option_scope() {
  // The loss keys are the loss scope's, with its specs: one options object can serve both.
  static const OptionScope scope = [] {
    OptionScope made{
        "train step",
        "accel_train_step_new",
        /*from_environment=*/false,
        {
            {"loss", OptionType::String, std::string("cross_entropy"),
             {"cross_entropy", "nll", "mse", "l1", "bce_with_logits", "output"}, false},
            {"max_grad_norm", OptionType::Double, 0.0, {}, false},
            {"norm_type", OptionType::Double, 2.0, {}, true},
            {"cuda_graph", OptionType::Bool, false, {}, false},
            {"cuda_graph_warmup", OptionType::Int, int64_t{3}, {}, true},
        }};
    for (const auto& spec : loss_option_scope().specs) made.specs.push_back(spec);
    return made;
  }();
  return scope;
}

PrepareConfig prepare_config(const Options* explicit_options) {
  const auto values = resolved(prepare_option_scope(), explicit_options);
  PrepareConfig config;
  config.reducer.find_unused_parameters = values.get_bool("find_unused_parameters");
  config.reducer.bucket_bytes = static_cast<int64_t>(values.get_double("bucket_cap_mb") * 1024 * 1024);
  config.reducer.first_bucket_bytes = static_cast<int64_t>(values.get_double("first_bucket_mb") * 1024 * 1024);
  config.reducer.gradient_as_bucket_view = values.get_bool("gradient_as_bucket_view");
  config.reducer.static_graph = values.get_bool("static_graph");
  const std::string compression = values.get_string("grad_compression");
  config.reducer.compression = compression == "fp16"   ? GradCompression::Fp16
                               : compression == "bf16" ? GradCompression::Bf16
                                                       : GradCompression::None;
  const int64_t zero_stage = values.get_int("zero_stage");
  if (zero_stage < 0 || zero_stage > 2) {
    fail(Code::BadOptionValue, "option zero_stage: " + std::to_string(zero_stage) +
                                   " is not a ZeRO stage accel has (0: data parallel, 1: optimizer state split "
                                   "between the ranks, 2: gradients too)");
  }
  config.reducer.zero_stage = static_cast<int32_t>(zero_stage);
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
  config.no_decay_patterns = option_list(values.get_string("no_decay"));
  return config;
}

SchedulerConfig scheduler_config(const Options* explicit_options) {
  const auto values = resolved(scheduler_option_scope(), explicit_options);
  // Options whose absence means something (a default that depends on the schedule, or one of two keys).
  const auto given = [&](const std::string& key) { return values.source(key) == OptionSource::Explicit; };
  SchedulerConfig config;
  config.warmup_steps = values.get_int("warmup_steps");
  config.total_steps = values.get_int("total_steps");
  if (given("num_cycles")) config.num_cycles = values.get_double("num_cycles");
  config.power = values.get_double("power");
  config.lr_end = values.get_double("lr_end");
  if (given("timescale")) config.timescale = values.get_int("timescale");
  if (given("min_lr")) config.min_lr = values.get_double("min_lr");
  if (given("min_lr_rate")) config.min_lr_rate = values.get_double("min_lr_rate");
  if (given("num_stable_steps")) config.num_stable_steps = values.get_int("num_stable_steps");
  config.num_decay_steps = values.get_int("num_decay_steps");
  config.min_lr_ratio = values.get_double("min_lr_ratio");
  config.warmup_type = values.get_string("warmup_type");
  config.decay_type = values.get_string("decay_type");
  config.step_size = values.get_int("step_size");
  config.gamma = values.get_double("gamma");
  config.milestones = parse_milestones(values.get_string("milestones"));
  config.max_lr = values.get_double("max_lr");
  config.pct_start = values.get_double("pct_start");
  config.anneal_strategy = values.get_string("anneal_strategy");
  config.cycle_momentum = values.get_bool("cycle_momentum");
  config.base_momentum = values.get_double("base_momentum");
  config.max_momentum = values.get_double("max_momentum");
  config.div_factor = values.get_double("div_factor");
  config.final_div_factor = values.get_double("final_div_factor");
  config.three_phase = values.get_bool("three_phase");
  config.mode = values.get_string("mode");
  config.factor = values.get_double("factor");
  config.patience = values.get_int("patience");
  config.threshold = values.get_double("threshold");
  config.threshold_mode = values.get_string("threshold_mode");
  config.cooldown = values.get_int("cooldown");
  config.eps = values.get_double("eps");
  config.split_batches = values.get_bool("split_batches");
  return config;
}

LossConfig loss_config(const Options* explicit_options) {
  return loss_config_of(resolved(loss_option_scope(), explicit_options));
}

TrainStepConfig train_step_config(const Options* explicit_options) {
  const auto values = resolved(train_step_option_scope(), explicit_options);
  TrainStepConfig config;
  config.loss = values.get_string("loss");
  config.loss_config = loss_config_of(values);
  config.max_grad_norm = values.get_double("max_grad_norm");
  config.norm_type = values.get_double("norm_type");
  config.cuda_graph = values.get_bool("cuda_graph");
  config.warmup_steps = values.get_int("cuda_graph_warmup");
  return config;
}

}  // namespace accel::train
