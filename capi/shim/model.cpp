#include "accel/model.h"

#include <tuple>
#include <vector>

#include "ckpt/save_model.hpp"
#include "ckpt/streamed_model.hpp"
#include "core/named_tensors.hpp"
#include "shim/entry_point.hpp"
#include "train/ddp/grad_sync_stats.hpp"
#include "train/training_options.hpp"

namespace {

int run_forward(const char* function, accel_model_t* model, accel_tensor_t* const* inputs, size_t count,
                const char* const* names, accel_tensor_t* const* named_inputs, size_t named_count, bool grad,
                accel_output_t** out) {
  return guarded_out(function, out, [&] {
    require(model, "model");
    const auto args = accel::capi::tensors_of(inputs, count, "inputs");
    const auto kwargs = accel::capi::named_tensors(names, named_inputs, named_count, "named_inputs");
    *out = new accel_output{{}, model->model->forward(args, kwargs, grad)};
  });
}

const accel::NamedTensors::value_type& entry_at(const accel::NamedTensors& list, size_t index) {
  if (index >= list.size()) {
    accel::fail(accel::Code::OutOfRange,
                "index " + std::to_string(index) + " is outside [0, " + std::to_string(list.size()) + ")");
  }
  return list[index];
}

// Names of parameters and buffers: NULL when out of range, as the header promises.
const char* name_at(const accel::NamedTensors& list, size_t index) {
  return index < list.size() ? list[index].first.c_str() : nullptr;
}

}  // namespace

extern "C" int accel_model_load(accel_model_t** out, const char* path) {
  return guarded_out(__func__, out, [&] {
    require(path, "path");
    *out = new accel_model{{}, accel::train::Model::load_file(path)};
  });
}

extern "C" int accel_model_load_buffer(accel_model_t** out, const void* data, size_t size) {
  return guarded_out(__func__, out, [&] {
    require(data, "data");
    *out = new accel_model{{}, accel::train::Model::load_buffer(std::string(static_cast<const char*>(data), size))};
  });
}

extern "C" int accel_model_from_tensors(accel_model_t** out, const char* const* names, accel_tensor_t* const* parameters,
                                        const int* trainable, size_t count, const char* const* buffer_names,
                                        accel_tensor_t* const* buffers, size_t buffer_count) {
  return guarded_out(__func__, out, [&] {
    const auto named = accel::capi::named_tensors(names, parameters, count, "parameters");
    std::vector<bool> trains(count, true);
    for (size_t i = 0; trainable != nullptr && i < count; ++i) trains[i] = trainable[i] != 0;
    const auto named_buffers = accel::capi::named_tensors(buffer_names, buffers, buffer_count, "buffers");
    *out = new accel_model{{}, accel::train::Model::from_tensors(named, trains, named_buffers)};
  });
}

extern "C" void accel_model_free(accel_model_t* model) { release(__func__, model); }

extern "C" int accel_state_prepare_model(accel_state_t* state, accel_model_t* model, const accel_options_t* options) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    model->model->prepare(state->accelerator->state(), accel::train::prepare_config(settings_of(options)));
    model->prepared_by = state->accelerator->training();
  });
}

extern "C" int accel_model_forward(accel_model_t* model, accel_tensor_t* const* inputs, size_t count,
                                   const char* const* names, accel_tensor_t* const* named_inputs, size_t named_count,
                                   accel_output_t** out) {
  return run_forward(__func__, model, inputs, count, names, named_inputs, named_count, true, out);
}

extern "C" int accel_model_evaluate(accel_model_t* model, accel_tensor_t* const* inputs, size_t count,
                                    const char* const* names, accel_tensor_t* const* named_inputs, size_t named_count,
                                    accel_output_t** out) {
  return run_forward(__func__, model, inputs, count, names, named_inputs, named_count, false, out);
}

extern "C" size_t accel_output_count(const accel_output_t* output) {
  return read_handle<size_t>(__func__, output, 0, [&](const auto&) { return output->output.values.size(); });
}

extern "C" const char* accel_output_name(const accel_output_t* output, size_t index) {
  return guarded_value<const char*>(__func__, nullptr, [&]() -> const char* {
    require(output, "output");
    if (output->output.kind != accel::train::ModelOutput::Kind::Dict) return nullptr;
    return name_at(output->output.values, index);
  });
}

extern "C" int accel_output_get(const accel_output_t* output, size_t index, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(output, "output");
    *out = new accel_tensor(entry_at(output->output.values, index).second);
  });
}

extern "C" int accel_output_get_named(const accel_output_t* output, const char* name, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(output, "output");
    require(name, "name");
    *out = new accel_tensor(accel::field_named(output->output.values, name, "the output"));
  });
}

extern "C" void accel_output_free(accel_output_t* output) { release(__func__, output); }

extern "C" int accel_model_train(accel_model_t* model, int on) {
  return guarded(__func__, [&] {
    require(model, "model");
    model->model->train(accel::capi::flag(on, "on"));
  });
}

extern "C" int accel_model_is_training(const accel_model_t* model) {
  return read_handle<int>(__func__, model, 0, [&](const auto&) { return static_cast<int>(model->model->is_training()); });
}

extern "C" size_t accel_model_num_parameters(const accel_model_t* model) {
  return read_handle<size_t>(__func__, model, 0, [&](const auto&) { return model->model->named_parameters().size(); });
}

extern "C" const char* accel_model_parameter_name(const accel_model_t* model, size_t index) {
  return read_handle<const char*>(__func__, model, nullptr, [&](const auto&) { return name_at(model->model->named_parameters(), index); });
}

extern "C" int accel_model_parameter(const accel_model_t* model, size_t index, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    const auto& [name, tensor] = entry_at(model->model->named_parameters(), index);
    if (model->model->sharded_units() != nullptr && tensor.requires_grad()) {
      accel::fail(accel::Code::Unsupported, "parameter '" + name + "' is sharded (zero_stage 3): no process holds "
                                            "it whole (accel_model_each_whole_tensor gathers the model's tensors)");
    }
    *out = new accel_tensor(tensor);
  });
}

extern "C" int accel_model_set_parameter(accel_model_t* model, size_t index, const accel_tensor_t* value) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(value, "value");
    model->model->set_parameter(index, value->tensor);
  });
}

extern "C" int accel_model_each_whole_tensor(accel_model_t* model, int keep, accel_whole_tensor_fn each, void* payload) {
  return guarded(__func__, [&] {
    require(model, "model");
    const bool keeping = accel::capi::flag(keep, "keep");
    if (keeping) require(reinterpret_cast<const void*>(each), "each");
    accel::ckpt::for_each_stored_tensor(*model->model, keeping, [&](const std::string& name, const at::Tensor& value) {
      const int code = each(name.c_str(), new accel_tensor(value.clone()), payload);
      if (code != 0) accel::fail(accel::Code::Callback, "each returned " + std::to_string(code) + " for '" + name + "'");
    });
  });
}

extern "C" size_t accel_model_num_buffers(const accel_model_t* model) {
  return read_handle<size_t>(__func__, model, 0, [&](const auto&) { return model->model->named_buffers().size(); });
}

extern "C" const char* accel_model_buffer_name(const accel_model_t* model, size_t index) {
  return read_handle<const char*>(__func__, model, nullptr, [&](const auto&) { return name_at(model->model->named_buffers(), index); });
}

extern "C" int accel_model_buffer(const accel_model_t* model, size_t index, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    *out = new accel_tensor(entry_at(model->model->named_buffers(), index).second);
  });
}

extern "C" int accel_model_begin_forward(accel_model_t* model, int grad_enabled) {
  return guarded(__func__, [&] {
    require(model, "model");
    model->model->begin_forward(accel::capi::flag(grad_enabled, "grad_enabled"));
  });
}

extern "C" int accel_model_grad_view(const accel_model_t* model, size_t index, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    *out = new accel_tensor{model->model->grad_view(index)};
  });
}

extern "C" int accel_model_grad_ready(accel_model_t* model, size_t index) {
  return guarded(__func__, [&] {
    require(model, "model");
    model->model->grad_ready(index);
  });
}

extern "C" int accel_model_grad_reached_by_no_rank(const accel_model_t* model, size_t index, int* out) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(out, "out");
    *out = model->model->grad_reached_by_no_rank(index) ? 1 : 0;
  });
}

extern "C" int accel_model_set_units(accel_model_t* model, const int32_t* unit_of_parameter, size_t count) {
  return guarded(__func__, [&] {
    require(model, "model");
    if (count > 0) require(unit_of_parameter, "unit_of_parameter");
    model->model->set_units(std::vector<int32_t>(unit_of_parameter, unit_of_parameter + count));
  });
}

extern "C" size_t accel_model_num_units(const accel_model_t* model) {
  return read_handle<size_t>(__func__, model, 0, [&](const auto&) {
    const auto* units = model->model->sharded_units();
    return units == nullptr ? size_t{0} : units->unit_count();
  });
}

extern "C" int accel_model_unit_numel(const accel_model_t* model, size_t unit, int64_t* out) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(out, "out");
    const auto* units = model->model->sharded_units();
    if (units == nullptr) accel::fail(accel::Code::InvalidState, "unit_numel: the model is not sharded (zero_stage 3)");
    *out = units->unit_numel(unit);
  });
}

extern "C" int accel_model_parameter_place(const accel_model_t* model, size_t index, size_t* unit, int64_t* offset) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(unit, "unit");
    require(offset, "offset");
    std::tie(*unit, *offset) = model->model->parameter_place(index);
  });
}

extern "C" int accel_model_unit_gather(accel_model_t* model, size_t unit, accel_tensor_t* full) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(full, "full");
    model->model->gather_unit(unit, full->tensor);
  });
}

extern "C" int accel_model_unit_gather_gradients(accel_model_t* model, size_t unit, accel_tensor_t* full, int* present) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(full, "full");
    require(present, "present");
    *present = model->model->gather_unit_gradients(unit, full->tensor) ? 1 : 0;
  });
}

extern "C" int accel_model_unit_prefetch(accel_model_t* model, size_t unit, accel_tensor_t* full) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(full, "full");
    model->model->prefetch_unit(unit, full->tensor);
  });
}

extern "C" int accel_model_set_checkpoint_model(accel_model_t* model, const char* how) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(how, "how");
    const std::string name(how);
    if (name != "whole" && name != "sharded") {
      accel::fail(accel::Code::BadOptionValue, "checkpoint_model: '" + name + "' is neither \"whole\" nor \"sharded\"");
    }
    model->model->set_checkpoint_in_pieces(name == "sharded");
  });
}

extern "C" int accel_model_unit_reduce(accel_model_t* model, size_t unit, accel_tensor_t* full_gradients, int* reduced) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(full_gradients, "full_gradients");
    require(reduced, "reduced");
    *reduced = model->model->reduce_unit(unit, full_gradients->tensor) ? 1 : 0;
  });
}

extern "C" int accel_model_end_backward(accel_model_t* model) {
  return guarded(__func__, [&] {
    require(model, "model");
    model->model->end_backward();
  });
}

extern "C" int accel_model_grad_sync_stat(const accel_model_t* model, const char* name, double* out) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(name, "name");
    require(out, "out");
    *out = accel::train::grad_sync_figure(model->model->grad_sync_report(), name);
  });
}

extern "C" int accel_model_unwrap(const accel_model_t* model, accel_model_t** out) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    *out = new accel_model{{}, model->model->unwrap()};
  });
}

extern "C" int accel_model_save_torchscript(const accel_model_t* model, const char* path) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(path, "path");
    model->model->save_torchscript(path);
  });
}

extern "C" int accel_model_load_weights(accel_model_t* model, const char* directory) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(directory, "directory");
    accel::ckpt::load_model(*model->model, directory);
  });
}
