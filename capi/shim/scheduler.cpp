#include "accel/scheduler.h"

#include <cmath>

#include "shim/entry_point.hpp"
#include "train/training_options.hpp"

namespace {

// The C callback as the multiplier function the scheduler calls; its failures become Error(Callback).
std::function<double(int64_t)> multiplier_function(accel_lr_multiplier_fn multiplier, void* payload) {
  return [multiplier, payload](int64_t step) {
    double value = 0;
    if (const int code = multiplier(step, &value, payload); code != 0) {
      accel::fail(accel::Code::Callback,
                  "the lr multiplier callback returned " + std::to_string(code) + " for step " + std::to_string(step));
    }
    if (!std::isfinite(value) || value < 0) {
      accel::fail(accel::Code::Callback, "the lr multiplier callback gave " + accel::format_number(value) +
                                             " for step " + std::to_string(step) + " (expected a finite number >= 0)");
    }
    return value;
  };
}

}  // namespace

extern "C" int accel_scheduler_new(accel_scheduler_t** out, accel_optimizer_t* optimizer, const char* name,
                                   const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    require(optimizer, "optimizer");
    require(name, "name");
    const auto config = accel::train::scheduler_config(settings_of(options));
    *out = new accel_scheduler{{}, accel::train::prepare_scheduler(optimizer->optimizer, name, config)};
  });
}

extern "C" int accel_scheduler_from_callback(accel_scheduler_t** out, accel_optimizer_t* optimizer,
                                             accel_lr_multiplier_fn multiplier, void* payload) {
  return guarded_out(__func__, out, [&] {
    require(optimizer, "optimizer");
    require(reinterpret_cast<const void*>(multiplier), "multiplier");
    *out = new accel_scheduler{{},
        accel::train::prepare_scheduler(optimizer->optimizer, multiplier_function(multiplier, payload))};
  });
}

extern "C" void accel_scheduler_free(accel_scheduler_t* scheduler) { release(__func__, scheduler); }

extern "C" int accel_scheduler_step(accel_scheduler_t* scheduler) {
  return guarded(__func__, [&] {
    require(scheduler, "scheduler");
    scheduler->scheduler->step();
  });
}

extern "C" int accel_scheduler_step_with_metric(accel_scheduler_t* scheduler, double metric) {
  return guarded(__func__, [&] {
    require(scheduler, "scheduler");
    scheduler->scheduler->step(metric);
  });
}

extern "C" int accel_scheduler_last_lr(const accel_scheduler_t* scheduler, size_t group, double* out) {
  return guarded(__func__, [&] {
    require(scheduler, "scheduler");
    require(out, "out");
    *out = scheduler->scheduler->scheduler().last_lr(group);
  });
}

extern "C" int64_t accel_scheduler_step_count(const accel_scheduler_t* scheduler) {
  return read_handle<int64_t>(__func__, scheduler, 0, [&](const auto&) { return scheduler->scheduler->scheduler().step_count(); });
}
