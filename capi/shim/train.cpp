#include "accel/train.h"

#include "ckpt/save_model.hpp"
#include "shim/entry_point.hpp"
#include "train/precision/autocast.hpp"

extern "C" int accel_state_accumulate(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->training()->accumulate();
  });
}

extern "C" int accel_state_sync_gradients(const accel_state_t* state) {
  return read_handle<int>(__func__, state, 0, [&](const auto&) { return static_cast<int>(state->accelerator->state()->sync_gradients()); });
}

extern "C" int64_t accel_state_gradient_accumulation_steps(const accel_state_t* state) {
  return read_handle<int64_t>(__func__, state, 0, [&](const auto&) { return state->accelerator->gradient_accumulation_steps(); });
}

extern "C" int accel_state_set_gradient_accumulation_steps(accel_state_t* state, int64_t steps) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->training()->set_gradient_accumulation_steps(steps);
  });
}

extern "C" int accel_state_set_sync_gradients(accel_state_t* state, int sync) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->state()->gradient_state().set_sync_gradients(sync != 0);
  });
}

extern "C" int accel_state_backward(accel_state_t* state, const accel_tensor_t* loss) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(loss, "loss");
    state->accelerator->training()->backward(loss->tensor);
  });
}

extern "C" int accel_state_backward_with_items(accel_state_t* state, const accel_tensor_t* loss, size_t num_items) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(loss, "loss");
    state->accelerator->training()->backward_with_items(loss->tensor, num_items);
  });
}

extern "C" int accel_state_no_sync_begin(accel_state_t* state, accel_model_t* model) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    state->accelerator->training()->no_sync_begin(*model->model);
  });
}

extern "C" int accel_state_no_sync_end(accel_state_t* state, accel_model_t* model) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    state->accelerator->training()->no_sync_end(*model->model);
  });
}

extern "C" int accel_state_autocast_begin(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    accel::train::autocast_begin(*state->accelerator->state());
  });
}

extern "C" int accel_state_autocast_end(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    accel::train::autocast_end();
  });
}

extern "C" int accel_state_free_memory(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->free_memory();
  });
}

extern "C" int accel_state_grad_scale(accel_state_t* state, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    *out = new accel_tensor{state->accelerator->training()->grad_scale()};
  });
}

extern "C" int accel_state_unscale_gradients(accel_state_t* state, accel_model_t* model, int* found_inf) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    require(found_inf, "found_inf");
    *found_inf = state->accelerator->training()->unscale_gradients(*model->model) ? 1 : 0;
  });
}

extern "C" int accel_state_update_grad_scale(accel_state_t* state, int found_inf) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->training()->update_grad_scale(accel::capi::flag(found_inf, "found_inf"));
  });
}

extern "C" int accel_state_clip_grad_norm(accel_state_t* state, accel_model_t* model, double max_norm, double norm_type,
                                          double* total_norm) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    const double norm = state->accelerator->training()->clip_grad_norm(*model->model, max_norm, norm_type);
    if (total_norm != nullptr) *total_norm = norm;
  });
}

extern "C" int accel_state_clip_grad_value(accel_state_t* state, accel_model_t* model, double clip_value) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    state->accelerator->training()->clip_grad_value(*model->model, clip_value);
  });
}

extern "C" int accel_state_save_model(accel_state_t* state, const accel_model_t* model, const char* directory,
                                      size_t max_shard_size) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    require(directory, "directory");
    accel::ckpt::save_model(*state->accelerator->state(), *model->model, directory, max_shard_size);
  });
}
