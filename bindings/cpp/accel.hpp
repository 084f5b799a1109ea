// accel for C++: a small, header-only RAII layer over the C ABI (accel.h). Every handle is owned by one
// object and freed by its destructor; every failing call throws accel::Error carrying the code and the
// library's message. Only the C ABI is used, so a program built with this header links libaccel alone.
//
// Thread safety is the C ABI's (see each capi/accel/*.h): these wrappers add no locking.
#pragma once

#include <accel.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace accel {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

// Throws Error unless code is ACCEL_OK.
inline void check(int code) {
  if (code != ACCEL_OK) throw Error(code, std::string(accel_error_name(code)) + ": " + accel_error_last());
}

namespace detail {
template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* handle) const noexcept { Free(handle); }
};
template <class T, void (*Free)(T*)>
using Owned = std::unique_ptr<T, Deleter<T, Free>>;

// Calls make(&out) and takes ownership of what it made.
template <class T, void (*Free)(T*), class Make>
Owned<T, Free> made(Make&& make) {
  T* out = nullptr;
  check(make(&out));
  return Owned<T, Free>(out);
}

template <class T>
constexpr int32_t dtype_of();
template <>
constexpr int32_t dtype_of<float>() { return ACCEL_DTYPE_FLOAT32; }
template <>
constexpr int32_t dtype_of<double>() { return ACCEL_DTYPE_FLOAT64; }
template <>
constexpr int32_t dtype_of<int64_t>() { return ACCEL_DTYPE_INT64; }
template <>
constexpr int32_t dtype_of<int32_t>() { return ACCEL_DTYPE_INT32; }
}  // namespace detail

class Options {
 public:
  Options() : handle_(detail::made<accel_options_t, accel_options_free>(accel_options_new)) {}
  // Any key from its text form ("true", "32", "bf16").
  Options& set(const std::string& key, const std::string& value) {
    check(accel_options_set(get(), key.c_str(), value.c_str()));
    return *this;
  }
  accel_options_t* get() const { return handle_.get(); }

 private:
  detail::Owned<accel_options_t, accel_options_free> handle_;
};

class Tensor {
 public:
  explicit Tensor(accel_tensor_t* owned) : handle_(owned) {}
  // A CPU tensor holding a copy of values in the given shape.
  template <class T>
  static Tensor from(const std::vector<T>& values, const std::vector<int64_t>& shape) {
    return Tensor(detail::made<accel_tensor_t, accel_tensor_free>([&](accel_tensor_t** out) {
                    return accel_tensor_from_buffer(out, values.data(), detail::dtype_of<T>(), shape.data(), shape.size());
                  }).release());
  }
  template <class T>
  std::vector<T> values() const {
    std::vector<T> out(static_cast<size_t>(accel_tensor_numel(get())));
    check(accel_tensor_copy_to_buffer(get(), out.data(), out.size() * sizeof(T)));
    return out;
  }
  // Wraps a DLPack tensor another framework made, without copying; it owns managed from then on (on an
  // error managed stays the caller's).
  static Tensor from_dlpack(DLManagedTensor* managed) {
    return Tensor(detail::made<accel_tensor_t, accel_tensor_free>(
                      [&](accel_tensor_t** out) { return accel_tensor_from_dlpack(out, managed); })
                      .release());
  }
  // Exports the tensor without copying; the caller owns the result (hand it to a framework, or call its
  // deleter once).
  DLManagedTensor* to_dlpack() const {
    DLManagedTensor* out = nullptr;
    check(accel_tensor_to_dlpack(&out, get()));
    return out;
  }
  std::vector<int64_t> shape() const {
    const int64_t* sizes = accel_tensor_shape(get());
    return std::vector<int64_t>(sizes, sizes + accel_tensor_ndim(get()));
  }
  accel_tensor_t* get() const { return handle_.get(); }

 private:
  detail::Owned<accel_tensor_t, accel_tensor_free> handle_;
};

class Model;

class State {
 public:
  explicit State(const Options* options = nullptr)
      : handle_(detail::made<accel_state_t, accel_state_free>(
            [&](accel_state_t** out) { return accel_state_new(out, options ? options->get() : nullptr); })) {}
  int32_t num_processes() const { return accel_state_num_processes(get()); }
  int32_t process_index() const { return accel_state_process_index(get()); }
  bool is_main_process() const { return accel_state_is_main_process(get()) != 0; }
  std::string device() const { return accel_state_device(get()); }
  // "no", "fp16" or "bf16".
  std::string mixed_precision() const { return accel_state_mixed_precision(get()); }

  void prepare(Model& model, const Options* options = nullptr);
  // The fp16 grad scaler for a model of the caller's tensors whose optimizer is not accel's (accel/train.h):
  // the loss scale (0-dim float32, the same memory every call; 1 without fp16 loss scaling), unscaling the
  // model's gradients (true: one holds inf or NaN, skip the step), and the scale's update after a step.
  Tensor grad_scale() {
    accel_tensor_t* out = nullptr;
    check(accel_state_grad_scale(get(), &out));
    return Tensor(out);
  }
  bool unscale_gradients(Model& model);
  void update_grad_scale(bool found_inf) { check(accel_state_update_grad_scale(get(), found_inf ? 1 : 0)); }
  void accumulate() { check(accel_state_accumulate(get())); }
  bool sync_gradients() const { return accel_state_sync_gradients(get()) != 0; }
  // What backward divides the loss by.
  int64_t gradient_accumulation_steps() const { return accel_state_gradient_accumulation_steps(get()); }
  void backward(const Tensor& loss) { check(accel_state_backward(get(), loss.get())); }
  double clip_grad_norm(Model& model, double max_norm, double norm_type = 2.0);
  // Collective: model.safetensors in directory, or shards and an index above max_shard_size bytes (0: 10 GB).
  void save_model(const Model& model, const std::string& directory, size_t max_shard_size = 0);
  Tensor reduce(const Tensor& input, const std::string& how) {
    accel_tensor_t* out = nullptr;
    check(accel_state_reduce(get(), input.get(), how.c_str(), &out));
    return Tensor(out);
  }
  // Collective, into the caller's tensors (accel_state_reduce_scatter, accel_state_all_gather): output gets
  // this rank's share of the "sum" or "mean" of every rank's input, or every rank's input in rank order.
  void reduce_scatter(const Tensor& input, Tensor& output, const std::string& how = "sum") {
    check(accel_state_reduce_scatter(get(), input.get(), how.c_str(), output.get()));
  }
  void all_gather(const Tensor& input, Tensor& output) { check(accel_state_all_gather(get(), input.get(), output.get())); }
  Tensor gather_for_metrics(const Tensor& input) {
    accel_tensor_t* out = nullptr;
    check(accel_state_gather_for_metrics(get(), input.get(), &out));
    return Tensor(out);
  }
  void print(const std::string& text) const { check(accel_state_print(get(), text.c_str())); }
  void init_trackers(const std::string& project_dir, const std::string& run, const std::string& config_json,
                     const Options* options = nullptr) {
    check(accel_state_init_trackers(get(), project_dir.c_str(), run.c_str(), config_json.c_str(),
                                    options ? options->get() : nullptr));
  }
  void log(const std::vector<std::pair<std::string, double>>& scalars, int64_t step) {
    std::vector<const char*> names;
    std::vector<double> values;
    for (const auto& [name, value] : scalars) {
      names.push_back(name.c_str());
      values.push_back(value);
    }
    check(accel_state_log(get(), names.data(), values.data(), names.size(), step));
  }
  void finish_trackers() { check(accel_state_finish_trackers(get())); }
  // Collective teardown (accel_state_shutdown).
  void shutdown() { check(accel_state_shutdown(get())); }
  accel_state_t* get() const { return handle_.get(); }

 private:
  detail::Owned<accel_state_t, accel_state_free> handle_;
};

class Dataset {
 public:
  // Named tensors sharing dim 0 (one sample per row); the dataset shares them.
  static Dataset from_tensors(const std::vector<std::pair<std::string, const Tensor*>>& fields) {
    std::vector<const char*> names;
    std::vector<accel_tensor_t*> tensors;
    for (const auto& [name, tensor] : fields) {
      names.push_back(name.c_str());
      tensors.push_back(tensor->get());
    }
    return Dataset(detail::made<accel_dataset_t, accel_dataset_free>([&](accel_dataset_t** out) {
      return accel_dataset_from_tensors(out, names.data(), tensors.data(), names.size());
    }));
  }
  accel_dataset_t* get() const { return handle_.get(); }

 private:
  explicit Dataset(detail::Owned<accel_dataset_t, accel_dataset_free> handle) : handle_(std::move(handle)) {}
  detail::Owned<accel_dataset_t, accel_dataset_free> handle_;
};

class Batch {
 public:
  explicit Batch(accel_batch_t* owned) : handle_(owned) {}
  Tensor operator[](const std::string& name) const {
    accel_tensor_t* out = nullptr;
    check(accel_batch_get(handle_.get(), name.c_str(), &out));
    return Tensor(out);
  }

 private:
  detail::Owned<accel_batch_t, accel_batch_free> handle_;
};

class Loader {
 public:
  Loader(State& state, const Dataset& dataset, const Options* options = nullptr)
      : handle_(detail::made<accel_loader_t, accel_loader_free>([&](accel_loader_t** out) {
          return accel_loader_new(out, state.get(), dataset.get(), options ? options->get() : nullptr);
        })) {}
  // The next batch of the epoch; nullopt when it is over (the next call starts the next epoch).
  std::optional<Batch> next() {
    accel_batch_t* out = nullptr;
    check(accel_loader_next(handle_.get(), &out));
    if (out == nullptr) return std::nullopt;
    return Batch(out);
  }
  int64_t length() const {
    int64_t out = 0;
    check(accel_loader_length(handle_.get(), &out));
    return out;
  }

 private:
  detail::Owned<accel_loader_t, accel_loader_free> handle_;
};

class Model {
 public:
  explicit Model(const std::string& torchscript_path)
      : handle_(detail::made<accel_model_t, accel_model_free>(
            [&](accel_model_t** out) { return accel_model_load(out, torchscript_path.c_str()); })) {}
  // A model of tensors that the caller's runtime owns (accel_model_from_tensors): shared, never copied, kept
  // alive by the model; trainable has one flag per parameter (false: frozen), or is empty (all trainable).
  // Its forward and backward are the caller's, which tells the model about them: begin_forward before each
  // forward; the backward accumulates each gradient into grad_view(index)'s storage (the gradient bucket
  // with several processes) and calls grad_ready(index) once it is final; end_backward after the backward.
  // For a torch::nn::Module, accel_torch.hpp does all of this.
  static Model from_tensors(const std::vector<std::pair<std::string, const Tensor*>>& parameters,
                            const std::vector<bool>& trainable = {},
                            const std::vector<std::pair<std::string, const Tensor*>>& buffers = {}) {
    if (!trainable.empty() && trainable.size() != parameters.size()) {
      throw Error(ACCEL_ERR_INVALID_ARGUMENT, "ACCEL_ERR_INVALID_ARGUMENT: " + std::to_string(trainable.size()) +
                                                  " trainable flags for " + std::to_string(parameters.size()) +
                                                  " parameters");
    }
    std::vector<const char*> names, buffer_names;
    std::vector<accel_tensor_t*> tensors, buffer_tensors;
    for (const auto& [name, tensor] : parameters) {
      names.push_back(name.c_str());
      tensors.push_back(tensor->get());
    }
    for (const auto& [name, tensor] : buffers) {
      buffer_names.push_back(name.c_str());
      buffer_tensors.push_back(tensor->get());
    }
    const std::vector<int> flags(trainable.begin(), trainable.end());
    return Model(detail::made<accel_model_t, accel_model_free>([&](accel_model_t** out) {
      return accel_model_from_tensors(out, names.data(), tensors.data(), flags.empty() ? nullptr : flags.data(),
                                      tensors.size(), buffer_names.data(), buffer_tensors.data(), buffer_tensors.size());
    }));
  }
  void begin_forward(bool grad_enabled = true) { check(accel_model_begin_forward(get(), grad_enabled ? 1 : 0)); }
  Tensor grad_view(size_t index) const {
    accel_tensor_t* out = nullptr;
    check(accel_model_grad_view(get(), index, &out));
    return Tensor(out);
  }
  void grad_ready(size_t index) { check(accel_model_grad_ready(get(), index)); }
  void end_backward() { check(accel_model_end_backward(get())); }
  // Whether no rank's backward reached parameter index in the last synchronising backward.
  bool grad_reached_by_no_rank(size_t index) const {
    int out = 0;
    check(accel_model_grad_reached_by_no_rank(get(), index, &out));
    return out != 0;
  }
  size_t num_parameters() const { return accel_model_num_parameters(get()); }
  // Parameter index's tensor: a new handle sharing the model's memory. Error(ACCEL_ERR_UNSUPPORTED) for a
  // trainable parameter under zero_stage 3 (this process holds a share of it; whole_tensors gathers them).
  Tensor parameter(size_t index) const {
    accel_tensor_t* out = nullptr;
    check(accel_model_parameter(get(), index, &out));
    return Tensor(out);
  }
  // ZeRO stage 3 (capi/accel/model.h, accel_model_set_units): before prepare, each parameter's unit; after
  // it, a unit's layout and where a parameter lies in it, and the unit's gather into a buffer of the layout
  // and its gradients' reduction (false: an accumulating backward kept them; true: averaged into this
  // process's share, release them). num_units is 0 for a model that is not sharded.
  void set_units(const std::vector<int32_t>& unit_of_parameter) {
    check(accel_model_set_units(get(), unit_of_parameter.data(), unit_of_parameter.size()));
  }
  size_t num_units() const { return accel_model_num_units(get()); }
  int64_t unit_numel(size_t unit) const {
    int64_t out = 0;
    check(accel_model_unit_numel(get(), unit, &out));
    return out;
  }
  std::pair<size_t, int64_t> parameter_place(size_t index) const {
    size_t unit = 0;
    int64_t offset = 0;
    check(accel_model_parameter_place(get(), index, &unit, &offset));
    return {unit, offset};
  }
  void unit_gather(size_t unit, Tensor& full) { check(accel_model_unit_gather(get(), unit, full.get())); }
  // The unit's averaged gradients into full (its layout, of its parameters' dtype), zeros where no process
  // holds any; false when no process holds gradients of the unit (before its first synchronising backward,
  // after a zero_grad that set them to none). Collective.
  bool unit_gather_gradients(size_t unit, Tensor& full) {
    int present = 0;
    check(accel_model_unit_gather_gradients(get(), unit, full.get(), &present));
    return present != 0;
  }
  // full must stay alive and untouched until the unit's next unit_gather or the end of the backward.
  void unit_prefetch(size_t unit, Tensor& full) { check(accel_model_unit_prefetch(get(), unit, full.get())); }
  bool unit_reduce(size_t unit, Tensor& full_gradients) {
    int reduced = 0;
    check(accel_model_unit_reduce(get(), unit, full_gradients.get(), &reduced));
    return reduced != 0;
  }
  // Every parameter and buffer by name, copies of their whole values, in the order State::save_model writes
  // them (a tensor several modules hold, once). Under zero_stage 3 they are gathered unit by unit: collective,
  // every process calls it, and one with keep false gets an empty list.
  std::vector<std::pair<std::string, Tensor>> whole_tensors(bool keep = true) {
    std::vector<std::pair<std::string, Tensor>> whole;
    const accel_whole_tensor_fn each = [](const char* name, accel_tensor_t* tensor, void* payload) {
      Tensor owned(tensor);
      try {
        static_cast<std::vector<std::pair<std::string, Tensor>>*>(payload)->emplace_back(name, std::move(owned));
        return 0;
      } catch (...) {
        return 1;
      }
    };
    check(accel_model_each_whole_tensor(get(), keep ? 1 : 0, keep ? each : nullptr, &whole));
    return whole;
  }
  // What the gradient all-reduces cost, one figure by name ("syncs", "bytes", "copied_bytes", ...).
  double grad_sync_stat(const std::string& name) const {
    double value = 0;
    check(accel_model_grad_sync_stat(get(), name.c_str(), &value));
    return value;
  }
  // The first tensor forward returns (with a graph, for training; without one when evaluating).
  Tensor forward(const Tensor& input, bool with_graph = true) {
    accel_tensor_t* inputs[] = {input.get()};
    accel_output_t* output = nullptr;
    check(with_graph ? accel_model_forward(get(), inputs, 1, nullptr, nullptr, 0, &output)
                     : accel_model_evaluate(get(), inputs, 1, nullptr, nullptr, 0, &output));
    detail::Owned<accel_output_t, accel_output_free> owned(output);
    accel_tensor_t* first = nullptr;
    check(accel_output_get(output, 0, &first));
    return Tensor(first);
  }
  void train(bool on) { check(accel_model_train(get(), on ? 1 : 0)); }
  // How save_state writes this prepared model from now on: "whole" or "sharded" (the prepare option
  // checkpoint_model's values).
  void set_checkpoint_model(const std::string& how) { check(accel_model_set_checkpoint_model(get(), how.c_str())); }
  // value, the whole value of parameter index, into the model: under zero_stage 3 this process's share of it
  // (not collective: every process passes the whole value), otherwise the tensor.
  void set_parameter(size_t index, const Tensor& value) { check(accel_model_set_parameter(get(), index, value.get())); }
  // What State::save_model wrote into directory; on an error the model is unchanged.
  void load_weights(const std::string& directory) { check(accel_model_load_weights(get(), directory.c_str())); }
  accel_model_t* get() const { return handle_.get(); }

 private:
  explicit Model(detail::Owned<accel_model_t, accel_model_free> handle) : handle_(std::move(handle)) {}
  detail::Owned<accel_model_t, accel_model_free> handle_;
};

inline void State::prepare(Model& model, const Options* options) {
  check(accel_state_prepare_model(get(), model.get(), options ? options->get() : nullptr));
}

inline void State::save_model(const Model& model, const std::string& directory, size_t max_shard_size) {
  check(accel_state_save_model(get(), model.get(), directory.c_str(), max_shard_size));
}

inline bool State::unscale_gradients(Model& model) {
  int found_inf = 0;
  check(accel_state_unscale_gradients(get(), model.get(), &found_inf));
  return found_inf != 0;
}

inline double State::clip_grad_norm(Model& model, double max_norm, double norm_type) {
  double total = 0;
  check(accel_state_clip_grad_norm(get(), model.get(), max_norm, norm_type, &total));
  return total;
}

class Optimizer {
 public:
  Optimizer(Model& model, const std::string& kind, const Options* options = nullptr)
      : handle_(detail::made<accel_optimizer_t, accel_optimizer_free>([&](accel_optimizer_t** out) {
          return accel_optimizer_new(out, model.get(), kind.c_str(), options ? options->get() : nullptr);
        })) {}
  void step() { check(accel_optimizer_step(get())); }
  void zero_grad() { check(accel_optimizer_zero_grad(get())); }
  accel_optimizer_t* get() const { return handle_.get(); }

 private:
  detail::Owned<accel_optimizer_t, accel_optimizer_free> handle_;
};

// A training step as one call (accel/train_step.h): forward, the loss, backward, clipping on sync steps, the
// optimizer step and zero_grad, as an Accelerate loop makes them; with the option cuda_graph on a GPU,
// captured once as a CUDA graph and replayed. The library keeps the model and the optimizer alive.
class TrainStep {
 public:
  TrainStep(Model& model, Optimizer& optimizer, const Options* options = nullptr)
      : handle_(detail::made<accel_train_step_t, accel_train_step_free>([&](accel_train_step_t** out) {
          return accel_train_step_new(out, model.get(), optimizer.get(), options ? options->get() : nullptr);
        })) {}
  // One step on forward(input) against target (nullptr for the loss "output"); returns the loss.
  Tensor run(const Tensor& input, const Tensor* target) { return run({&input}, target); }
  // One step on forward(inputs..., name=tensor...) against target (nullptr for the loss "output").
  Tensor run(const std::vector<const Tensor*>& inputs, const Tensor* target,
             const std::vector<std::pair<std::string, const Tensor*>>& named = {}) {
    std::vector<accel_tensor_t*> positional, named_tensors;
    std::vector<const char*> names;
    for (const Tensor* input : inputs) positional.push_back(input->get());
    for (const auto& [name, tensor] : named) {
      names.push_back(name.c_str());
      named_tensors.push_back(tensor->get());
    }
    accel_tensor_t* loss = nullptr;
    check(accel_train_step_run(get(), positional.data(), positional.size(), names.data(), named_tensors.data(),
                               named_tensors.size(), target ? target->get() : nullptr, &loss));
    return Tensor(loss);
  }
  // Why the last step did not replay a CUDA graph; "" when it did.
  std::string eager_reason() const {
    const char* reason = accel_train_step_eager_reason(get());
    return reason ? reason : "";
  }
  // A count: "steps", "replays", "captures", "warmup_steps" or "eager_steps".
  int64_t stat(const std::string& name) const {
    double value = 0;
    check(accel_train_step_stat(get(), name.c_str(), &value));
    return static_cast<int64_t>(value);
  }
  accel_train_step_t* get() const { return handle_.get(); }

 private:
  detail::Owned<accel_train_step_t, accel_train_step_free> handle_;
};

class Scheduler {
 public:
  Scheduler(Optimizer& optimizer, const std::string& name, const Options* options = nullptr)
      : handle_(detail::made<accel_scheduler_t, accel_scheduler_free>([&](accel_scheduler_t** out) {
          return accel_scheduler_new(out, optimizer.get(), name.c_str(), options ? options->get() : nullptr);
        })) {}
  void step() { check(accel_scheduler_step(handle_.get())); }
  double last_lr(size_t group = 0) const {
    double lr = 0;
    check(accel_scheduler_last_lr(handle_.get(), group, &lr));
    return lr;
  }

 private:
  detail::Owned<accel_scheduler_t, accel_scheduler_free> handle_;
};

class Progress {
 public:
  Progress(const State& state, int64_t total, const std::string& description)
      : handle_(detail::made<accel_progress_t, accel_progress_free>([&](accel_progress_t** out) {
          return accel_progress_new(out, state.get(), total, description.c_str());
        })) {}
  void update(int64_t steps, double loss) { check(accel_progress_update(handle_.get(), steps, loss)); }

 private:
  detail::Owned<accel_progress_t, accel_progress_free> handle_;
};

// accel_loss_compute.
inline Tensor compute_loss(const std::string& name, const Tensor& input, const Tensor& target) {
  accel_tensor_t* out = nullptr;
  check(accel_loss_compute(&out, name.c_str(), input.get(), target.get(), nullptr));
  return Tensor(out);
}

}  // namespace accel
