#include "accel/optimizer.h"
#include "accel/scheduler.h"

#include <sstream>

#include "core/env.hpp"
#include "shim/guard.hpp"
#include "shim/handles.hpp"

using accel::capi::guarded;
using accel::capi::guarded_out;
using accel::capi::require;

namespace {

accel::ResolvedOptions resolved(const accel_options_t* options) {
  return accel::resolve_options(options ? &options->options : nullptr, accel::process_env());
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

extern "C" int accel_optimizer_new(accel_optimizer_t** out, accel_model_t* model, const char* kind,
                                   const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    require(kind, "kind");
    const auto& state = model->model->state();
    if (!state) accel::fail(accel::Code::InvalidState, "prepare the model (accel_prepare_model) before making its optimizer");
    const auto values = resolved(options);
    accel::train::OptimizerConfig config;
    config.lr = values.get_double("lr");
    config.momentum = values.get_double("momentum");
    config.dampening = values.get_double("dampening");
    config.nesterov = values.get_bool("nesterov");
    config.weight_decay = values.get_double("weight_decay");
    config.beta1 = values.get_double("beta1");
    config.beta2 = values.get_double("beta2");
    config.eps = values.get_double("eps");
    config.no_decay_patterns = split_patterns(values.get_string("no_decay"));
    accel::train::NamedTensorList trainable;
    for (auto& parameter : model->model->named_parameters()) {
      if (parameter.second.requires_grad()) trainable.push_back(parameter);
    }
    auto optimizer = std::make_unique<accel::train::Optimizer>(kind, trainable, config);
    auto accelerated = std::make_shared<accel::train::AcceleratedOptimizer>(accel::train::Accelerator::of(state),
                                                                            std::move(optimizer));
    *out = new accel_optimizer{std::move(accelerated), model->model};
  });
}

extern "C" void accel_optimizer_free(accel_optimizer_t* optimizer) { delete optimizer; }

extern "C" int accel_optimizer_step(accel_optimizer_t* optimizer) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    optimizer->optimizer->step();
  });
}

extern "C" int accel_optimizer_zero_grad(accel_optimizer_t* optimizer) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    optimizer->optimizer->zero_grad();
  });
}

extern "C" int accel_optimizer_step_was_skipped(const accel_optimizer_t* optimizer) {
  return optimizer && optimizer->optimizer->step_was_skipped();
}

extern "C" size_t accel_optimizer_num_groups(const accel_optimizer_t* optimizer) {
  return optimizer ? optimizer->optimizer->optimizer().num_groups() : 0;
}

extern "C" double accel_optimizer_lr(const accel_optimizer_t* optimizer, size_t group) {
  if (!optimizer || group >= optimizer->optimizer->optimizer().num_groups()) return 0;
  return optimizer->optimizer->optimizer().lr(group);
}

extern "C" int accel_optimizer_set_lr(accel_optimizer_t* optimizer, size_t group, double lr) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    auto& inner = optimizer->optimizer->optimizer();
    if (group >= inner.num_groups()) {
      accel::fail(accel::Code::OutOfRange, "group " + std::to_string(group) + " is outside [0, " + std::to_string(inner.num_groups()) + ")");
    }
    if (!(lr >= 0)) accel::fail(accel::Code::InvalidArgument, "lr " + std::to_string(lr) + " is negative");
    inner.set_lr(group, lr);
  });
}

extern "C" double accel_optimizer_loss_scale(const accel_optimizer_t* optimizer) {
  if (!optimizer) return 0;
  auto* scaler = optimizer->optimizer->accelerator()->scaler();
  return scaler ? scaler->get_scale() : 1.0;
}

extern "C" int accel_scheduler_new(accel_scheduler_t** out, accel_optimizer_t* optimizer, const char* name,
                                   const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    require(optimizer, "optimizer");
    require(name, "name");
    const auto values = resolved(options);
    accel::train::SchedulerConfig config;
    config.warmup_steps = values.get_int("warmup_steps");
    config.total_steps = values.get_int("total_steps");
    config.num_cycles = values.get_double("num_cycles");
    config.step_size = values.get_int("step_size");
    config.gamma = values.get_double("gamma");
    config.max_lr = values.get_double("max_lr");
    config.pct_start = values.get_double("pct_start");
    config.div_factor = values.get_double("div_factor");
    config.final_div_factor = values.get_double("final_div_factor");
    auto scheduler = std::make_unique<accel::train::Scheduler>(optimizer->optimizer->optimizer(), name, config);
    *out = new accel_scheduler{std::make_unique<accel::train::AcceleratedScheduler>(optimizer->optimizer, std::move(scheduler))};
  });
}

extern "C" int accel_scheduler_from_callback(accel_scheduler_t** out, accel_optimizer_t* optimizer,
                                             accel_lr_multiplier_fn multiplier, void* payload) {
  return guarded_out(__func__, out, [&] {
    require(optimizer, "optimizer");
    require(reinterpret_cast<const void*>(multiplier), "multiplier");
    auto scheduler = std::make_unique<accel::train::Scheduler>(
        optimizer->optimizer->optimizer(), [multiplier, payload](int64_t step) { return multiplier(step, payload); });
    *out = new accel_scheduler{std::make_unique<accel::train::AcceleratedScheduler>(optimizer->optimizer, std::move(scheduler))};
  });
}

extern "C" void accel_scheduler_free(accel_scheduler_t* scheduler) { delete scheduler; }

extern "C" int accel_scheduler_step(accel_scheduler_t* scheduler) {
  return guarded(__func__, [&] {
    require(scheduler, "scheduler");
    scheduler->scheduler->step();
  });
}

extern "C" double accel_scheduler_last_lr(const accel_scheduler_t* scheduler) {
  return scheduler ? scheduler->scheduler->scheduler().last_lr(0) : 0;
}

extern "C" int64_t accel_scheduler_step_count(const accel_scheduler_t* scheduler) {
  return scheduler ? scheduler->scheduler->scheduler().step_count() : 0;
}
