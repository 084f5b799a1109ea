#include "accel/model.h"

#include "core/env.hpp"
#include "shim/guard.hpp"
#include "shim/handles.hpp"

using accel::capi::guarded;
using accel::capi::guarded_out;
using accel::capi::require;

namespace {

accel_model* wrap(std::shared_ptr<accel::train::Model> model) {
  auto* handle = new accel_model{std::move(model), {}, {}};
  for (const auto& parameter : handle->model->named_parameters()) handle->parameter_names.push_back(parameter.first);
  for (const auto& buffer : handle->model->named_buffers()) handle->buffer_names.push_back(buffer.first);
  return handle;
}

int run_forward(const char* function, accel_model_t* model, accel_tensor_t* const* inputs, size_t count,
                const char* const* names, accel_tensor_t* const* named_inputs, size_t named_count, bool grad,
                accel_output_t** out) {
  return guarded_out(function, out, [&] {
    require(model, "model");
    if (count > 0) require(inputs, "inputs");
    if (named_count > 0) {
      require(names, "names");
      require(named_inputs, "named_inputs");
    }
    std::vector<at::Tensor> args;
    for (size_t i = 0; i < count; ++i) {
      require(inputs[i], "inputs[i]");
      args.push_back(inputs[i]->tensor);
    }
    accel::train::NamedTensorList kwargs;
    for (size_t i = 0; i < named_count; ++i) {
      require(names[i], "names[i]");
      require(named_inputs[i], "named_inputs[i]");
      kwargs.emplace_back(names[i], named_inputs[i]->tensor);
    }
    *out = new accel_output{model->model->forward(args, kwargs, grad)};
  });
}

int tensor_at(const char* function, const accel::train::NamedTensorList& list, size_t index, accel_tensor_t** out) {
  return guarded_out(function, out, [&] {
    if (index >= list.size()) {
      accel::fail(accel::Code::OutOfRange, "index " + std::to_string(index) + " is outside [0, " + std::to_string(list.size()) + ")");
    }
    *out = new accel_tensor(list[index].second);
  });
}

}  // namespace

extern "C" int accel_model_load(accel_model_t** out, const char* path) {
  return guarded_out(__func__, out, [&] {
    require(path, "path");
    *out = wrap(accel::train::Model::load_file(path));
  });
}

extern "C" int accel_model_load_buffer(accel_model_t** out, const void* data, size_t size) {
  return guarded_out(__func__, out, [&] {
    require(data, "data");
    *out = wrap(accel::train::Model::load_buffer(std::string(static_cast<const char*>(data), size)));
  });
}

extern "C" void accel_model_free(accel_model_t* model) { delete model; }

extern "C" int accel_prepare_model(accel_state_t* state, accel_model_t* model, const accel_options_t* options) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(model, "model");
    const auto resolved = accel::resolve_options(options ? &options->options : nullptr, accel::process_env());
    accel::train::PrepareConfig config;
    config.reducer.find_unused_parameters = resolved.get_bool("find_unused_parameters");
    config.reducer.bucket_bytes = static_cast<int64_t>(resolved.get_double("bucket_cap_mb") * 1024 * 1024);
    config.reducer.first_bucket_bytes = static_cast<int64_t>(resolved.get_double("first_bucket_mb") * 1024 * 1024);
    config.broadcast_buffers = resolved.get_bool("broadcast_buffers");
    config.keep_low_precision_outputs = !resolved.get_bool("convert_outputs_to_fp32");
    model->model->prepare(state->state, config);
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

extern "C" size_t accel_output_count(const accel_output_t* output) { return output ? output->output.values.size() : 0; }

extern "C" const char* accel_output_name(const accel_output_t* output, size_t index) {
  if (!output || output->output.kind != accel::train::ModelOutput::Kind::Dict || index >= output->output.values.size()) {
    return nullptr;
  }
  return output->output.values[index].first.c_str();
}

extern "C" int accel_output_get(const accel_output_t* output, size_t index, accel_tensor_t** out) {
  if (output == nullptr) return guarded_out(__func__, out, [] { require(nullptr, "output"); });
  return tensor_at(__func__, output->output.values, index, out);
}

extern "C" int accel_output_get_named(const accel_output_t* output, const char* name, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(output, "output");
    require(name, "name");
    std::string known;
    for (const auto& [entry, tensor] : output->output.values) {
      if (entry == name) {
        *out = new accel_tensor(tensor);
        return;
      }
      known += (known.empty() ? "" : ", ") + entry;
    }
    accel::fail(accel::Code::InvalidArgument, std::string("the output has no entry '") + name + "' (it has: " + known + ")");
  });
}

extern "C" void accel_output_free(accel_output_t* output) { delete output; }

extern "C" int accel_model_train(accel_model_t* model, int on) {
  return guarded(__func__, [&] {
    require(model, "model");
    model->model->train(on != 0);
  });
}

extern "C" int accel_model_is_training(const accel_model_t* model) { return model && model->model->is_training(); }

extern "C" size_t accel_model_num_parameters(const accel_model_t* model) { return model ? model->parameter_names.size() : 0; }

extern "C" const char* accel_model_parameter_name(const accel_model_t* model, size_t index) {
  return model && index < model->parameter_names.size() ? model->parameter_names[index].c_str() : nullptr;
}

extern "C" int accel_model_parameter(const accel_model_t* model, size_t index, accel_tensor_t** out) {
  if (model == nullptr) return guarded_out(__func__, out, [] { require(nullptr, "model"); });
  return tensor_at(__func__, model->model->named_parameters(), index, out);
}

extern "C" size_t accel_model_num_buffers(const accel_model_t* model) { return model ? model->buffer_names.size() : 0; }

extern "C" const char* accel_model_buffer_name(const accel_model_t* model, size_t index) {
  return model && index < model->buffer_names.size() ? model->buffer_names[index].c_str() : nullptr;
}

extern "C" int accel_model_buffer(const accel_model_t* model, size_t index, accel_tensor_t** out) {
  if (model == nullptr) return guarded_out(__func__, out, [] { require(nullptr, "model"); });
  return tensor_at(__func__, model->model->named_buffers(), index, out);
}

extern "C" int accel_model_unwrap(const accel_model_t* model, accel_model_t** out) {
  return guarded_out(__func__, out, [&] {
    require(model, "model");
    *out = wrap(model->model->unwrap());
  });
}

extern "C" int accel_model_save_torchscript(const accel_model_t* model, const char* path) {
  return guarded(__func__, [&] {
    require(model, "model");
    require(path, "path");
    model->model->save_torchscript(path);
  });
}
