#include "accel/train_step.h"

#include <string>

#include "shim/entry_point.hpp"
#include "train/step/train_step.hpp"

extern "C" int accel_train_step_new(accel_train_step_t** out, accel_model_t* model, accel_optimizer_t* optimizer,
                                    const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    require(optimizer, "optimizer");
    const auto config = accel::train::train_step_config(settings_of(options));
    *out = new accel_train_step{{}, std::make_unique<accel::train::TrainStep>(model->model, optimizer->optimizer, config)};
  });
}

extern "C" void accel_train_step_free(accel_train_step_t* step) { release(__func__, step); }

extern "C" int accel_train_step_run(accel_train_step_t* step, accel_tensor_t* const* inputs, size_t count,
                                    const char* const* names, accel_tensor_t* const* named_inputs, size_t named_count,
                                    const accel_tensor_t* target, accel_tensor_t** loss) {
  return guarded(__func__, [&] {
    if (loss != nullptr) *loss = nullptr;
    require(step, "step");
    const auto args = accel::capi::tensors_of(inputs, count, "inputs");
    const auto kwargs = accel::capi::named_tensors(names, named_inputs, named_count, "named_inputs");
    at::Tensor target_tensor;
    if (target != nullptr) {
      require(target, "target");
      target_tensor = target->tensor;
    }
    auto result = step->step->run(args, kwargs, target_tensor);
    if (loss != nullptr) *loss = new accel_tensor{std::move(result)};
  });
}

extern "C" const char* accel_train_step_eager_reason(const accel_train_step_t* step) {
  return read_handle<const char*>(__func__, step, nullptr, [&](const auto&) { return step->step->eager_reason().c_str(); });
}

extern "C" int accel_train_step_stat(const accel_train_step_t* step, const char* name, double* out) {
  return guarded(__func__, [&] {
    require(step, "step");
    require(name, "name");
    require(out, "out");
    *out = accel::train::train_step_figure(step->step->stats(), name);
  });
}
