#include "train/training_options.hpp"

#include <sstream>

#include "core/error.hpp"

namespace accel::train {

namespace {

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

// A zero_param_dtype / zero_reduce_dtype choice (the table allows only these).
std::optional<at::ScalarType> unit_dtype(const std::string& name) {
  if (name == "fp32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  return std::nullopt;
}

}  // namespace

LossConfig loss_config(const ResolvedOptions& values) {
  LossConfig config;
  config.reduction = values.get_string("reduction");
  config.label_smoothing = values.get_double("label_smoothing");
  config.ignore_index = values.get_int("ignore_index");
  return config;
}

PrepareConfig prepare_config(const Options* explicit_options) {
  const auto values = resolve_options(prepare_option_scope(), explicit_options);
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
  if (zero_stage < 0 || zero_stage > 3) {
    fail(Code::BadOptionValue, "option zero_stage: " + std::to_string(zero_stage) +
                                   " is not a ZeRO stage (0: data parallel, 1: optimizer state split between the "
                                   "ranks, 2: gradients too, 3: the parameters too, as FSDP's FULL_SHARD)");
  }
  config.reducer.zero_stage = static_cast<int32_t>(zero_stage);
  config.reducer.unit_param_dtype = unit_dtype(values.get_string("zero_param_dtype"));
  config.reducer.unit_reduce_dtype = unit_dtype(values.get_string("zero_reduce_dtype"));
  config.reducer.unit_prefetch = values.get_bool("zero_prefetch");
  config.reducer.zero_hybrid = values.get_bool("zero_hybrid_shard");
  if (config.reducer.zero_hybrid && zero_stage == 0) {
    fail(Code::BadOptionValue, "option zero_hybrid_shard: hybrid sharding splits ZeRO's state over each node's ranks, "
                               "and zero_stage is 0 (data parallelism splits nothing); give zero_stage 1, 2 or 3");
  }
  config.reducer.cpu_offload = values.get_bool("zero_cpu_offload");
  if (config.reducer.cpu_offload && zero_stage == 0) {
    fail(Code::BadOptionValue, "option zero_cpu_offload: what is offloaded is ZeRO's share of each process (stage 1 "
                               "and 2: the optimizer's state and step; 3: the parameters too), and zero_stage is 0 "
                               "(data parallelism splits nothing); give zero_stage 1, 2 or 3");
  }
  const std::string checkpoint_model = values.get_string("checkpoint_model");
  config.checkpoint_model = checkpoint_model == "sharded" ? PrepareConfig::CheckpointModel::Pieces
                            : checkpoint_model == "whole" ? PrepareConfig::CheckpointModel::Whole
                                                          : PrepareConfig::CheckpointModel::Auto;
  for (const char* key : {"zero_param_dtype", "zero_reduce_dtype"}) {
    if (values.get_string(key) != "auto" && zero_stage != 3) {
      fail(Code::BadOptionValue, std::string("option ") + key + ": '" + values.get_string(key) +
                                     "' is zero_stage 3's mixed precision (units gathered and reduced in 16 bits), "
                                     "and zero_stage is " + std::to_string(zero_stage));
    }
  }
  config.broadcast_buffers = values.get_bool("broadcast_buffers");
  config.keep_low_precision_outputs = !values.get_bool("convert_outputs_to_fp32");
  return config;
}

OptimizerConfig optimizer_config(const Options* explicit_options) {
  const auto values = resolve_options(optimizer_option_scope(), explicit_options);
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
  const auto values = resolve_options(scheduler_option_scope(), explicit_options);
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
  return loss_config(resolve_options(loss_option_scope(), explicit_options));
}

}  // namespace accel::train
