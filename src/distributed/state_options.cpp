#include "distributed/state_options.hpp"

#include <limits>

namespace accel::distributed {

namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
}  // namespace

const OptionScope& state_option_scope() {
  static const OptionScope scope{
      "state",
      "accel_state_new",
      /*from_environment=*/true,
      {
          {"use_cpu", OptionType::Bool, false, {}, false},
          {"mixed_precision", OptionType::String, std::string("no"), {"no", "fp16", "bf16"}, false},
          {"device", OptionType::String, std::string(""), {}, false},
          {"backend", OptionType::String, std::string("auto"), {"auto", "gloo", "nccl"}, false},
          {"intra_node_transport", OptionType::String, std::string("auto"), {"auto", "shm", "gloo"}, false},
          // 1e9 s (about 31 years) keeps the timeout in nanoseconds within the 64-bit clocks c10d and Gloo use.
          {"timeout_s", OptionType::Double, 1800.0, {}, true, 1e9},
          {"check_shapes", OptionType::Bool, true, {}, false},
          {"gradient_accumulation_steps", OptionType::Int, int64_t{1}, {}, true},
          {"sync_with_dataloader", OptionType::Bool, true, {}, false},
          {"sync_each_batch", OptionType::Bool, false, {}, false},
          {"step_scheduler_with_optimizer", OptionType::Bool, true, {}, false},
          {"rng_types", OptionType::String, std::string("generator"), {"generator", "torch", "cuda"}, false,
           kInfinity, -kInfinity, kInfinity, /*list=*/true},
          // GradScalerKwargs: torch's GradScaler arguments, for fp16.
          {"init_scale", OptionType::Double, 65536.0, {}, true},
          {"growth_factor", OptionType::Double, 2.0, {}, false, kInfinity, /*above=*/1.0},
          {"backoff_factor", OptionType::Double, 0.5, {}, true, kInfinity, -kInfinity, /*below=*/1.0},
          {"growth_interval", OptionType::Int, int64_t{2000}, {}, true},
          {"grad_scaler_enabled", OptionType::Bool, true, {}, false},
          {"dynamo_backend", OptionType::String, std::string("no"), {}, false},
          {"timeline", OptionType::String, std::string(""), {}, false},
          {"timeline_steps", OptionType::Int, int64_t{100}, {}, true},
          {"project_dir", OptionType::String, std::string(""), {}, false},
          {"total_limit", OptionType::Int, int64_t{0}, {}, false},
      }};
  return scope;
}

const std::vector<std::string>& per_handle_options() {
  static const std::vector<std::string> keys{"project_dir", "total_limit", "gradient_accumulation_steps"};
  return keys;
}

const std::vector<std::string>& non_option_variables() {
  static const std::vector<std::string> names{"ACCEL_LIBRARY", "ACCEL_LIB_DIR", "ACCEL_PYTHON", "ACCEL_LAUNCHER",
                                              "ACCEL_RESTART_COUNT", "ACCEL_JOB_KEY"};
  return names;
}

}  // namespace accel::distributed
