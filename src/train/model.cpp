#include "train/model.hpp"

#include <ATen/ops/cat.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/script.h>

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "distributed/collectives.hpp"
#include "train/autocast.hpp"
#include "train/torchscript_file.hpp"

namespace accel::train {

struct Model::Impl {
  torch::jit::Module module;
  std::shared_ptr<distributed::State> state;
  PrepareConfig config;
  std::unique_ptr<Reducer> reducer;
  // A module's parameters or buffers: every slot under its name, and each tensor once (its first slot).
  struct Slots {
    NamedTensors every;
    NamedTensors unique;
    std::vector<size_t> unique_slots;  // unique[i] is every[unique_slots[i]]
  };
  std::optional<Slots> parameters;  // cached by list_tensors()
  std::optional<Slots> buffers;
  bool no_sync = false;
  // DDP's require_forward_param_sync: whether the last forward synchronised (grad enabled, and its backward
  // all-reduces); the next forward then broadcasts the buffers.
  bool last_forward_synchronised = true;
};

Model::Model(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

namespace {

std::shared_ptr<Model::Impl> loaded(std::istream& archive, const std::string& source) {
  auto impl = std::make_shared<Model::Impl>();
  impl->module = load_torchscript(archive, source);
  return impl;
}

// Sends rank 0's values of these tensors to every rank, one flat buffer per dtype.
void broadcast_coalesced(distributed::State& state, const std::vector<at::Tensor>& tensors) {
  std::map<at::ScalarType, std::vector<at::Tensor>> by_type;
  for (const auto& tensor : tensors) by_type[tensor.scalar_type()].push_back(tensor);
  for (auto& [type, group] : by_type) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& tensor : group) flat_parts.push_back(tensor.detach().reshape({-1}));
    auto flat = at::cat(flat_parts);
    distributed::broadcast(state, flat, 0);
    int64_t offset = 0;
    for (auto& tensor : group) {
      tensor.detach().copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }
}

at::Tensor as_output(const at::Tensor& tensor, bool to_fp32) {
  if (to_fp32 && (tensor.scalar_type() == at::kHalf || tensor.scalar_type() == at::kBFloat16)) return tensor.to(at::kFloat);
  return tensor;
}

ModelOutput convert(const c10::IValue& value, bool to_fp32) {
  ModelOutput output;
  auto take = [&](const c10::IValue& item, const std::string& name) {
    if (!item.isTensor()) fail(Code::Unsupported, "forward returned a " + item.tagKind() + " where a tensor was expected");
    output.values.emplace_back(name, as_output(item.toTensor(), to_fp32));
  };
  if (value.isTensor()) {
    take(value, "");
  } else if (value.isTuple() || value.isList()) {
    output.kind = ModelOutput::Kind::Tuple;
    const auto items = value.isTuple() ? value.toTupleRef().elements().vec() : value.toListRef().vec();
    for (const auto& item : items) take(item, "");
  } else if (value.isGenericDict()) {
    output.kind = ModelOutput::Kind::Dict;
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString()) fail(Code::Unsupported, "forward returned a dict whose keys are not strings");
      take(entry.value(), entry.key().toStringRef());
    }
  } else {
    fail(Code::Unsupported, "forward returned a " + value.tagKind() + "; expected a tensor, a tuple or a dict of tensors");
  }
  return output;
}

}  // namespace

std::shared_ptr<Model> Model::load_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file.good()) fail(Code::Io, "cannot open model file '" + path + "'");
  return std::shared_ptr<Model>(new Model(loaded(file, "'" + path + "'")));
}

std::shared_ptr<Model> Model::load_buffer(const std::string& bytes) {
  std::istringstream stream(bytes);
  return std::shared_ptr<Model>(new Model(loaded(stream, "the buffer")));
}

void Model::prepare(std::shared_ptr<distributed::State> state, const PrepareConfig& config) {
  if (impl_->state) fail(Code::InvalidState, "the model is already prepared");
  impl_->module.to(at::Device(state->device()));
  refresh_cached_tensors();  // the move to the device replaced the tensors
  impl_->config = config;
  if (state->launch().world_size > 1) {
    std::vector<at::Tensor> tensors;
    for (const auto& parameter : named_parameters()) tensors.push_back(parameter.second);
    for (const auto& buffer : named_buffers()) tensors.push_back(buffer.second);
    broadcast_coalesced(*state, tensors);
    auto trainable = trainable_parameters();
    if (!trainable.empty()) impl_->reducer = std::make_unique<Reducer>(state, std::move(trainable), config.reducer);
  }
  impl_->state = std::move(state);
}

bool Model::prepared() const { return impl_->state != nullptr; }

ModelOutput Model::forward(const std::vector<at::Tensor>& args, const NamedTensors& kwargs, bool grad_enabled) {
  const timeline::Span span(grad_enabled ? "forward" : "evaluate");
  torch::AutoGradMode grad_mode(grad_enabled);
  if (impl_->state && impl_->state->launch().world_size > 1) {
    // DDP's forward, which looks at the grad mode and not at the module's training flag.
    if (impl_->config.broadcast_buffers && impl_->last_forward_synchronised) {
      std::vector<at::Tensor> buffers;
      for (const auto& buffer : impl_->module.named_buffers(true)) buffers.push_back(buffer.value);
      if (!buffers.empty()) broadcast_coalesced(*impl_->state, buffers);
    }
    // Accelerate's accumulate(): DDP skips the all-reduce unless this step syncs or sync_each_batch is set.
    const bool synchronises = grad_enabled && !impl_->no_sync &&
                              (impl_->state->sync_gradients() || impl_->state->options().get_bool("sync_each_batch"));
    if (impl_->reducer && grad_enabled) impl_->reducer->prepare_for_backward(synchronises);
    impl_->last_forward_synchronised = synchronises;
  }
  std::vector<c10::IValue> inputs(args.begin(), args.end());
  std::unordered_map<std::string, c10::IValue> named;
  for (const auto& [name, tensor] : kwargs) named.emplace(name, tensor);
  const std::string precision = impl_->state ? impl_->state->options().get_string("mixed_precision") : "no";
  const std::string device = impl_->state ? impl_->state->device() : "cpu";
  c10::IValue result;
  bool autocast = false;
  {
    AutocastScope scope(precision, device);
    autocast = scope.active();
    try {
      result = impl_->module.forward(inputs, named);
    } catch (const std::exception& error) {
      // TorchScript's interpreter reports a failing model line as a plain runtime error, LibTorch's own
      // checks as c10::Error.
      fail_from(error, Code::Torch, "forward failed: ");
    }
  }
  return convert(result, autocast && !impl_->config.keep_low_precision_outputs);
}

void Model::train(bool on) { impl_->module.train(on); }
bool Model::is_training() const { return impl_->module.is_training(); }
void Model::set_no_sync(bool on) { impl_->no_sync = on; }
bool Model::no_sync() const { return impl_->no_sync; }

namespace {

// TorchScript lists a tensor that several submodules hold once per holder: the same TensorImpl in each
// slot. torch's named_parameters keeps the first.
template <typename List>
Model::Impl::Slots slots_of(const List& list) {
  Model::Impl::Slots slots;
  std::set<const c10::TensorImpl*> seen;
  for (const auto& item : list) {
    if (seen.insert(item.value.unsafeGetTensorImpl()).second) {
      slots.unique_slots.push_back(slots.every.size());
      slots.unique.emplace_back(item.name, item.value);
    }
    slots.every.emplace_back(item.name, item.value);
  }
  return slots;
}

template <typename List>
void refresh(Model::Impl::Slots& slots, const List& list) {
  size_t i = 0;
  for (const auto& item : list) slots.every[i++].second = item.value;
  for (size_t u = 0; u < slots.unique.size(); ++u) slots.unique[u].second = slots.every[slots.unique_slots[u]].second;
}

}  // namespace

void Model::list_tensors() const {
  if (!impl_->parameters) impl_->parameters = slots_of(impl_->module.named_parameters(true));
  if (!impl_->buffers) impl_->buffers = slots_of(impl_->module.named_buffers(true));
}

void Model::refresh_cached_tensors() {
  // Only the tensors change: names handed out through the C API stay valid. Moving to a device keeps
  // each TensorImpl (set_data), so tied slots stay one tensor.
  if (impl_->parameters) refresh(*impl_->parameters, impl_->module.named_parameters(true));
  if (impl_->buffers) refresh(*impl_->buffers, impl_->module.named_buffers(true));
}

const NamedTensors& Model::named_parameters() const {
  list_tensors();
  return impl_->parameters->unique;
}

const NamedTensors& Model::named_buffers() const {
  list_tensors();
  return impl_->buffers->unique;
}

NamedTensors Model::parameters_and_buffers() const {
  list_tensors();
  NamedTensors tensors = impl_->parameters->every;
  tensors.insert(tensors.end(), impl_->buffers->every.begin(), impl_->buffers->every.end());
  return tensors;
}

NamedTensors Model::trainable_parameters() const {
  NamedTensors trainable;
  for (const auto& parameter : named_parameters()) {
    if (parameter.second.requires_grad()) trainable.push_back(parameter);
  }
  return trainable;
}

std::vector<std::vector<std::string>> Model::bucket_names() const {
  return impl_->reducer ? impl_->reducer->bucket_names() : std::vector<std::vector<std::string>>{};
}

GradSyncReport Model::grad_sync_report() const {
  return impl_->reducer ? impl_->reducer->sync_report() : GradSyncReport{};
}

std::shared_ptr<Model> Model::unwrap() const {
  auto impl = std::make_shared<Impl>();
  impl->module = impl_->module;
  return std::shared_ptr<Model>(new Model(impl));
}

void Model::save_torchscript(const std::string& path) const {
  try {
    impl_->module.save(path);
  } catch (const std::exception& error) {
    fail_from(error, Code::Io, "cannot save the model to '" + path + "': ");
  }
}

const std::shared_ptr<distributed::State>& Model::state() const { return impl_->state; }

}  // namespace accel::train
