#include "accel/optimizer.h"

#include <memory>
#include <string>

#include "shim/entry_point.hpp"
#include "train/training_options.hpp"

extern "C" int accel_optimizer_new(accel_optimizer_t** out, accel_model_t* model, const char* kind,
                                   const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    require(kind, "kind");
    const auto config = accel::train::optimizer_config(settings_of(options));
    *out = new accel_optimizer{{}, accel::train::prepare_optimizer(model->prepared_by, *model->model, kind, config), model->model};
  });
}

extern "C" void accel_optimizer_free(accel_optimizer_t* optimizer) { release(__func__, optimizer); }

extern "C" int accel_optimizer_new_external(accel_optimizer_t** out, accel_model_t* model, accel_external_step_fn step,
                                            void* payload) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    require(reinterpret_cast<const void*>(step), "step");
    auto external_step = [step, payload] {
      if (const int code = step(payload); code != 0) {
        accel::fail(accel::Code::Callback, "the external step callback returned " + std::to_string(code));
      }
    };
    *out = new accel_optimizer{
        {}, accel::train::prepare_external_optimizer(model->prepared_by, *model->model, external_step), model->model};
  });
}

extern "C" size_t accel_optimizer_num_pieces(const accel_optimizer_t* optimizer) {
  return read_handle<size_t>(__func__, optimizer, 0,
                             [&](const auto&) { return optimizer->optimizer->optimizer().owned_elements().size(); });
}

extern "C" int accel_optimizer_piece_tensors(const accel_optimizer_t* optimizer, size_t index, accel_tensor_t** value,
                                             accel_tensor_t** grad) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    require(value, "value");
    require(grad, "grad");
    *value = nullptr;
    *grad = nullptr;
    const at::Tensor tensor = optimizer->optimizer->optimizer().owned_tensor(index);
    auto value_handle = std::make_unique<accel_tensor>(tensor.detach().view({-1}));
    if (tensor.grad().defined()) *grad = new accel_tensor(tensor.grad().view({-1}));
    *value = value_handle.release();
  });
}

extern "C" int accel_optimizer_piece(const accel_optimizer_t* optimizer, size_t index, const char** name, int64_t* begin,
                                     int64_t* numel) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    require(name, "name");
    require(begin, "begin");
    require(numel, "numel");
    const auto& owned = optimizer->optimizer->optimizer().owned_elements();
    if (index >= owned.size()) {
      accel::fail(accel::Code::OutOfRange, "piece " + std::to_string(index) + " out of range (the optimizer steps " +
                                               std::to_string(owned.size()) + ")");
    }
    *name = owned[index].name.c_str();
    *begin = owned[index].begin;
    *numel = owned[index].numel;
  });
}

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
  return read_handle<int>(__func__, optimizer, 0, [&](const auto&) { return static_cast<int>(optimizer->optimizer->step_was_skipped()); });
}

extern "C" size_t accel_optimizer_num_groups(const accel_optimizer_t* optimizer) {
  return read_handle<size_t>(__func__, optimizer, 0, [&](const auto&) { return optimizer->optimizer->optimizer().num_groups(); });
}

extern "C" int accel_optimizer_lr(const accel_optimizer_t* optimizer, size_t group, double* out) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    require(out, "out");
    *out = optimizer->optimizer->optimizer().lr(group);
  });
}

extern "C" int accel_optimizer_set_lr(accel_optimizer_t* optimizer, size_t group, double lr) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    optimizer->optimizer->optimizer().set_lr(group, lr);
  });
}

extern "C" int accel_optimizer_momentum(const accel_optimizer_t* optimizer, size_t group, double* out) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    require(out, "out");
    *out = optimizer->optimizer->optimizer().momentum(group);
  });
}

extern "C" int accel_optimizer_betas(const accel_optimizer_t* optimizer, size_t group, double* beta1, double* beta2) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    require(beta1, "beta1");
    require(beta2, "beta2");
    const auto [first, second] = optimizer->optimizer->optimizer().betas(group);
    *beta1 = first;
    *beta2 = second;
  });
}

extern "C" int accel_optimizer_loss_scale(const accel_optimizer_t* optimizer, double* out) {
  return guarded(__func__, [&] {
    require(optimizer, "optimizer");
    require(out, "out");
    *out = optimizer->optimizer->loss_scale();
  });
}
