#include "accel/train.h"

#include "ckpt/save_model.hpp"
#include "core/env.hpp"
#include "shim/guard.hpp"
#include "shim/handles.hpp"
#include "train/losses.hpp"

using accel::capi::guarded;
using accel::capi::guarded_out;
using accel::capi::require;

namespace {

std::vector<at::Tensor> trainable_parameters(const accel_model_t* model) {
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : model->model->named_parameters()) {
    if (parameter.second.requires_grad()) parameters.push_back(parameter.second);
  }
  return parameters;
}

}  // namespace

extern "C" int accel_accumulate(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    accel::train::Accelerator::of(state->state)->accumulate();
  });
}

extern "C" int accel_sync_gradients(const accel_state_t* state) { return state && state->state->sync_gradients(); }

extern "C" int accel_backward(accel_state_t* state, const accel_tensor_t* loss) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(loss, "loss");
    accel::train::Accelerator::of(state->state)->backward(loss->tensor);
  });
}

extern "C" int accel_clip_grad_norm(accel_state_t* state, accel_model_t* model, double max_norm, double norm_type,
                                    double* total_norm) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    const double norm = accel::train::Accelerator::of(state->state)->clip_grad_norm(trainable_parameters(model), max_norm, norm_type);
    if (total_norm != nullptr) *total_norm = norm;
  });
}

extern "C" int accel_clip_grad_value(accel_state_t* state, accel_model_t* model, double clip_value) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    accel::train::Accelerator::of(state->state)->clip_grad_value(trainable_parameters(model), clip_value);
  });
}

extern "C" int accel_loss(const char* name, const accel_tensor_t* input, const accel_tensor_t* target,
                          const accel_options_t* options, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(name, "name");
    require(input, "input");
    require(target, "target");
    // Losses run every step: without explicit options, defaults and environment are read once.
    static const auto environment_only = accel::resolve_options(nullptr, accel::process_env());
    const auto values = options ? accel::resolve_options(&options->options, accel::process_env()) : environment_only;
    accel::train::LossConfig config;
    config.reduction = values.get_string("reduction");
    config.label_smoothing = values.get_double("label_smoothing");
    config.ignore_index = values.get_int("ignore_index");
    *out = new accel_tensor(accel::train::compute_loss(name, input->tensor, target->tensor, config));
  });
}

extern "C" int accel_save_model(accel_state_t* state, const accel_model_t* model, const char* directory) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    require(directory, "directory");
    accel::ckpt::save_model(*state->state, *model->model, directory);
  });
}
