#include "train/model/model.hpp"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/timeline.hpp"
#include "distributed/collectives/collectives.hpp"
#include "distributed/group/process_group.hpp"
#include "distributed/transport/transport.hpp"
#include "train/model/called_modules.hpp"
#include "train/model/gathered_units.hpp"
#include "train/model/model_body.hpp"
#include "train/precision/autocast.hpp"

namespace accel::train {

namespace {

// A forward cut around the children it calls: the children in the order forward calls them, each with the
// units that lie in it.
using CutChildren = std::vector<std::pair<std::string, std::vector<size_t>>>;

}  // namespace

struct Model::Impl {
  std::shared_ptr<ModelBody> body;
  std::shared_ptr<distributed::State> state;
  PrepareConfig config;
  std::unique_ptr<Reducer> reducer;
  // ZeRO-Offload on one process, which has no reducer (one_process_offload).
  std::unique_ptr<ZeroPartition> offloaded_alone;
  // ZeRO stage 3 (set_units before prepare; units after), and which units the synchronising backward in
  // progress has reduced.
  std::vector<int32_t> unit_of_parameter;
  std::unique_ptr<ShardedUnits> units;
  // Stage 3 on a model accel runs (TorchScript): its parameters' buffers and the backward's hooks; the
  // children its forward is cut around (ModelBody::forward_around) with the units that lie in each, and the
  // units held through the forward (every unit when nothing is cut).
  std::unique_ptr<GatheredUnits> gathered;
  CutChildren cut;
  std::vector<size_t> held;
  bool backward_synchronises = false;
  std::vector<bool> reduced;
  std::vector<bool> reached_since_sync;  // a TorchScript model's units its backwards reached since the last sync
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
  mutable std::mutex optimizers_mutex;
  // One per accel optimizer made over the model (none: the caller steps it with an optimizer of its own).
  mutable std::vector<std::function<int64_t()>> optimizer_state_bytes;
};

Model::Model(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

namespace {

std::shared_ptr<Model::Impl> around(std::shared_ptr<ModelBody> body) {
  auto impl = std::make_shared<Model::Impl>();
  impl->body = std::move(body);
  return impl;
}

// Sends rank 0's values of these tensors to every rank, a flat buffer per dtype of at most about 64 MiB at a
// time (a larger tensor alone), so that the copy travelling beside the tensors stays small.
void broadcast_coalesced(distributed::State& state, const std::vector<at::Tensor>& tensors) {
  constexpr int64_t kFlatBytes = int64_t{64} << 20;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_type;
  for (const auto& tensor : tensors) by_type[tensor.scalar_type()].push_back(tensor);
  for (auto& [type, group] : by_type) {
    for (size_t begin = 0; begin < group.size();) {
      size_t end = begin;
      int64_t bytes = 0;
      std::vector<at::Tensor> flat_parts;
      while (end < group.size() && (end == begin || bytes + static_cast<int64_t>(group[end].nbytes()) <= kFlatBytes)) {
        bytes += static_cast<int64_t>(group[end].nbytes());
        flat_parts.push_back(group[end++].detach().reshape({-1}));
      }
      auto flat = at::cat(flat_parts);
      distributed::broadcast(state, flat, 0);
      int64_t offset = 0;
      for (size_t i = begin; i < end; ++i) {
        group[i].detach().copy_(flat.narrow(0, offset, group[i].numel()).view(group[i].sizes()));
        offset += group[i].numel();
      }
      begin = end;
    }
  }
}

// Whether prepare takes a parameter's values a unit at a time (ShardedUnits) rather than broadcasting them
// into the tensor: zero_stage 3's trainable parameters on several processes.
bool taken_by_units(const at::Tensor& parameter, bool sharded) { return sharded && parameter.requires_grad(); }

// One line per parameter and buffer: what every rank's model must agree on before prepare sends rank 0's
// values to the others. On a process that receives them (receives), a tensor prepare writes into that has no
// memory of its own for each element (one element expanded to its shape) says so, so that every process
// fails naming it; zero_stage 3's trainable parameters are never written (sharded: ShardedUnits takes
// process 0's values).
std::vector<std::string> describe_tensors(const NamedTensors& parameters, const NamedTensors& buffers, bool sharded,
                                          bool receives) {
  std::vector<std::string> lines;
  for (const auto* list : {&parameters, &buffers}) {
    for (const auto& [name, tensor] : *list) {
      const char* kind = list == &buffers ? "buffer" : tensor.requires_grad() ? "parameter" : "frozen parameter";
      std::string line = std::string(kind) + " '" + name + "' " + c10::str(tensor.sizes()) + " " +
                         c10::toString(tensor.scalar_type());
      const bool written = receives && (list == &buffers || !taken_by_units(tensor, sharded));
      if (written && at::has_internal_overlap(tensor) == at::MemOverlap::Yes) {
        line += " with elements sharing memory (expanded): no memory to receive process 0's values in (only "
                "zero_stage 3's trainable parameters may be so, on processes other than 0)";
      }
      lines.push_back(line);
    }
  }
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Fails on every rank alike, naming the first tensor where a process's model differs from process 0's.
void require_same_models(distributed::State& state, const NamedTensors& parameters, const NamedTensors& buffers,
                         bool sharded) {
  const bool receives = state.launch().rank != 0;
  const auto all = distributed::texts_if_different(state, distributed::CallKind::PrepareModel,
                                                   joined(describe_tensors(parameters, buffers, sharded, receives)));
  if (!all) return;
  const auto first = split_lines((*all)[0]);
  std::string text = "prepare: the processes' models differ (every process must prepare the same model):";
  for (size_t r = 1; r < all->size(); ++r) {
    const auto lines = split_lines((*all)[r]);
    size_t i = 0;
    while (i < first.size() && i < lines.size() && first[i] == lines[i]) ++i;
    if (i == first.size() && i == lines.size()) continue;
    const auto at = [&](const std::vector<std::string>& of) { return i < of.size() ? of[i] : "nothing"; };
    text += "\n  - tensor " + std::to_string(i) + " (parameters, then buffers) is " + at(first) + " on process 0, " +
            at(lines) + " on process " + std::to_string(r);
  }
  fail(Code::ShapeMismatch, text);
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
  return std::shared_ptr<Model>(new Model(around(torchscript_body(file, "'" + path + "'"))));
}

std::shared_ptr<Model> Model::load_buffer(const std::string& bytes) {
  std::istringstream stream(bytes);
  return std::shared_ptr<Model>(new Model(around(torchscript_body(stream, "the buffer"))));
}

std::shared_ptr<Model> Model::from_tensors(const NamedTensors& parameters, const std::vector<bool>& trainable,
                                           const NamedTensors& buffers) {
  return std::shared_ptr<Model>(new Model(around(eager_module_body(parameters, trainable, buffers))));
}

void Model::prepare(std::shared_ptr<distributed::State> state, const PrepareConfig& config) {
  if (impl_->state) fail(Code::InvalidState, "the model is already prepared");
  const bool several = state->launch().world_size > 1;
  // Stage 3 takes the trainable parameters' values a unit at a time from process 0, wherever they lie, so
  // that a model larger than a device (or than a process's memory, elsewhere than on process 0) is never
  // whole there. On one process it shards nothing, but offloaded its units keep the model in host memory.
  const bool sharded = config.reducer.zero_stage == 3 && (several || config.reducer.cpu_offload);
  impl_->body->to(at::Device(state->device()), /*trainable_too=*/!sharded);
  refresh_cached_tensors();  // the move to the device replaced the tensors
  impl_->config = config;
  const bool host_owned = impl_->body->host_owned();
  if (config.reducer.zero_stage == 3 && !host_owned && config.reducer.unit_param_dtype) {
    fail(Code::Unsupported, "zero_param_dtype: a TorchScript model run by accel is gathered in its parameters' dtype "
                            "(its forward cannot be handed 16-bit weights); use mixed_precision (autocast)");
  }
  if (host_owned) {
    // The caller's backward accumulates into accel's gradient storage (the buckets themselves with several
    // processes), marking each gradient ready itself.
    impl_->config.reducer.host_gradients = true;
    impl_->config.reducer.gradient_as_bucket_view = true;
  }
  if (several) {
    require_same_models(*state, named_parameters(), named_buffers(), sharded);
    std::vector<at::Tensor> tensors;
    for (const auto& parameter : named_parameters()) {
      if (!taken_by_units(parameter.second, sharded)) tensors.push_back(parameter.second);
    }
    for (const auto& buffer : named_buffers()) tensors.push_back(buffer.second);
    broadcast_coalesced(*state, tensors);
    auto trainable = trainable_parameters();
    if (sharded) {
      shard_parameters(state);
    } else if (!trainable.empty()) {
      impl_->reducer = std::make_unique<Reducer>(state, std::move(trainable), impl_->config.reducer);
    }
  } else if (sharded) {
    shard_parameters(state);
  } else if (host_owned) {
    for (const auto& parameter : trainable_parameters()) {
      auto grad = at::zeros_like(parameter.second, at::MemoryFormat::Contiguous);
      parameter.second.mutable_grad() = grad;
    }
  }
  if (!several && !sharded && config.reducer.cpu_offload && config.reducer.zero_stage > 0) {
    std::vector<int64_t> numels;
    for (const auto& parameter : trainable_parameters()) numels.push_back(parameter.second.numel());
    if (!numels.empty()) impl_->offloaded_alone = std::make_unique<ZeroPartition>(one_process_offload(numels));
  }
  impl_->state = std::move(state);
}

bool Model::prepared() const { return impl_->state != nullptr; }

namespace {

// The top-level child a parameter's name puts it in (the part before its first '.'); "" for the root's own.
std::string top_level_child(const std::string& name) {
  const auto dot = name.find('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

// The submodule of `children` (paths from the root) whose parameter `name` is; "" for none.
std::string owning_child(const std::string& name, const std::vector<std::string>& children) {
  for (const std::string& child : children) {
    if (within_module(name, child)) return child;
  }
  return "";
}

// For each trainable parameter, the cut child whose units are to hold it; "" for one held through the forward:
// the root's own, one inside a held submodule, or one held by several children (tied weights) that are not all
// the same cut child. `slots`: every name of every parameter (Impl::Slots::every).
std::vector<std::string> cut_child_of(const ModelBody::CutChildren& children, const NamedTensors& trainable,
                                      const NamedTensors& slots) {
  std::unordered_map<const c10::TensorImpl*, std::vector<std::string>> names;
  for (const auto& [name, tensor] : slots) names[tensor.unsafeGetTensorImpl()].push_back(name);
  std::vector<std::string> child_of;
  for (const auto& [name, tensor] : trainable) {
    std::set<std::string> owners;
    for (const std::string& slot : names.at(tensor.unsafeGetTensorImpl())) {
      owners.insert(owning_child(slot, children.held).empty() ? owning_child(slot, children.cut) : "");
    }
    child_of.push_back(owners.size() == 1 ? *owners.begin() : "");
  }
  return child_of;
}

// The cut children with the units that lie in each (a unit whose parameters are all in one cut child), and the
// other units, held; nothing cut, and every unit held, when no unit lies in a cut child.
std::pair<CutChildren, std::vector<size_t>> units_by_child(const std::vector<std::string>& children,
                                                           const std::vector<std::string>& child_of,
                                                           const std::vector<int32_t>& unit_of, size_t units) {
  std::vector<std::set<std::string>> children_of_unit(units);
  for (size_t i = 0; i < unit_of.size(); ++i) children_of_unit[static_cast<size_t>(unit_of[i])].insert(child_of[i]);
  CutChildren cut;
  for (const std::string& child : children) cut.emplace_back(child, std::vector<size_t>());
  std::vector<size_t> held;
  bool any_cut = false;
  for (size_t unit = 0; unit < units; ++unit) {
    const auto& owners = children_of_unit[unit];
    const auto child = std::find(children.begin(), children.end(), owners.size() == 1 ? *owners.begin() : "");
    if (child == children.end()) {
      held.push_back(unit);
      continue;
    }
    cut[static_cast<size_t>(child - children.begin())].second.push_back(unit);
    any_cut = true;
  }
  if (!any_cut) cut.clear();
  return {std::move(cut), std::move(held)};
}

// The units of the nearest child after (step +1) or before (step -1) cut[k] that holds any: those to prefetch
// around cut[k]'s forward (+1) and backward (-1).
std::vector<size_t> units_ahead(const CutChildren& cut, size_t k, int step) {
  for (auto next = static_cast<std::ptrdiff_t>(k) + step; next >= 0 && next < static_cast<std::ptrdiff_t>(cut.size());
       next += step) {
    if (!cut[static_cast<size_t>(next)].second.empty()) return cut[static_cast<size_t>(next)].second;
  }
  return {};
}

}  // namespace

// Stage 3's units over the trainable parameters, filled a unit at a time with process 0's values; the model
// lets go of the caller's memory of each unit as soon as it is taken, so that the caller can release it (its
// parameters become views of each unit's buffer): the tensors here keep their shapes and no storage.
void Model::shard_parameters(const std::shared_ptr<distributed::State>& state) {
  const NamedTensors& parameters = named_parameters();
  const bool host_owned = impl_->body->host_owned();
  // Without units given: one for a model of the caller's tensors; for a TorchScript model, one per submodule its
  // forward is cut around (nn.ModuleList's items each a unit), the other parameters by top-level child (the
  // part of the name before its first '.', the root's own parameters one more).
  const ModelBody::CutChildren children = host_owned ? ModelBody::CutChildren() : impl_->body->cut_children();
  const std::vector<std::string> child_of = cut_child_of(children, trainable_parameters(), impl_->parameters->every);
  std::map<std::pair<bool, std::string>, int32_t> unit_of_key;
  std::vector<int32_t> unit_of;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].second.requires_grad()) continue;
    if (!impl_->unit_of_parameter.empty()) {
      unit_of.push_back(impl_->unit_of_parameter[i]);
    } else if (host_owned) {
      unit_of.push_back(0);
    } else {
      const std::string& child = child_of[unit_of.size()];
      const auto key = child.empty() ? std::make_pair(false, top_level_child(parameters[i].first)) : std::make_pair(true, child);
      unit_of.push_back(unit_of_key.emplace(key, static_cast<int32_t>(unit_of_key.size())).first->second);
    }
  }
  if (unit_of.empty()) return;
  const ReducerConfig& config = impl_->config.reducer;
  const NamedTensors trainable = trainable_parameters();
  // The caller's memory of a unit's parameters goes as soon as the unit is taken (a TorchScript model's
  // parameters become views of GatheredUnits' buffers below): the tensors keep their shapes and no storage.
  const auto let_go = [&](size_t unit) {
    for (size_t i = 0; i < trainable.size(); ++i) {
      if (static_cast<size_t>(unit_of[i]) == unit) release_memory(trainable[i].second);
    }
  };
  impl_->units = std::make_unique<ShardedUnits>(
      state, trainable, unit_of,
      ShardedUnits::Options{at::Device(state->device()), config.unit_param_dtype, config.unit_reduce_dtype,
                            config.zero_hybrid, config.cpu_offload},
      host_owned ? std::function<void(size_t)>(let_go) : std::function<void(size_t)>());
  impl_->reduced.assign(impl_->units->unit_count(), false);
  if (!host_owned) {
    impl_->gathered = std::make_unique<GatheredUnits>(
        *impl_->units, trainable_parameters(),
        [this](size_t unit, const at::Tensor& gradients) { return hand_over_unit(unit, gradients); },
        [this](const std::vector<bool>& reached) { return units_reached_by_no_rank(reached); },
        [this] { check_units_after_backward("backward"); });
    std::tie(impl_->cut, impl_->held) = units_by_child(children.cut, child_of, unit_of, impl_->units->unit_count());
  }
}

void Model::set_units(std::vector<int32_t> unit_of_parameter) {
  if (impl_->state) fail(Code::InvalidState, "set_units: the model is prepared already; give its units before prepare");
  require_argument(unit_of_parameter.size() == named_parameters().size(),
                   "set_units: " + std::to_string(unit_of_parameter.size()) + " units given for " +
                       std::to_string(named_parameters().size()) + " parameters");
  impl_->unit_of_parameter = std::move(unit_of_parameter);
}

const ShardedUnits* Model::sharded_units() const { return impl_->units.get(); }

ShardedUnits& Model::require_units(const char* what) const {
  if (!impl_->units) {
    fail(Code::InvalidState, std::string(what) + ": the model is not sharded (it is prepared under zero_stage 3 on "
                                                 "several processes, with trainable parameters, or not at all)");
  }
  return *impl_->units;
}

void Model::gather_unit(size_t unit, const at::Tensor& full) {
  refuse_caller_protocol("gather_unit");
  const timeline::Span span("unit gather");
  require_units("gather_unit").gather(unit, full);
}

bool Model::gather_unit_gradients(size_t unit, const at::Tensor& full) {
  return require_units("gather_unit_gradients").gather_gradients(unit, full);
}

void Model::prefetch_unit(size_t unit, const at::Tensor& full) {
  refuse_caller_protocol("prefetch_unit");
  require_units("prefetch_unit").prefetch(unit, full);
}

bool Model::reduce_unit(size_t unit, const at::Tensor& full_gradients) {
  refuse_caller_protocol("reduce_unit");
  return hand_over_unit(unit, full_gradients);
}

void Model::refuse_caller_protocol(const char* what) const {
  if (impl_->gathered) {
    fail(Code::InvalidState, std::string(what) + ": accel gathers and reduces this TorchScript model's units itself, "
                                                 "around the forward and backward it runs");
  }
}

bool Model::hand_over_unit(size_t unit, const at::Tensor& full_gradients) {
  ShardedUnits& units = require_units("reduce_unit");
  if (unit >= units.unit_count()) units.unit_numel(unit);  // the out-of-range error, before any decision
  if (!impl_->backward_synchronises) return false;
  if (const ZeroPartition* zero = zero_partition(); zero != nullptr) require_optimizer_for(*zero);
  const timeline::Span span("unit reduce");
  units.reduce(unit, full_gradients);
  impl_->reduced[unit] = true;
  return true;
}

std::pair<size_t, int64_t> Model::parameter_place(size_t index) const {
  const size_t trainable = trainable_index(index, "parameter_place");
  return require_units("parameter_place").place(trainable);
}

void Model::begin_forward(bool grad_enabled) {
  require_prepared_host_model("begin_forward");
  start_forward(grad_enabled);
}

void Model::start_forward(bool grad_enabled) {
  if (!impl_->state) return;
  const bool several = impl_->state->launch().world_size > 1;
  // On one process only stage 3 (offloaded) has anything to decide: whether its units' gradients go to the
  // shares.
  if (!several && !impl_->units) return;
  // DDP's forward, which looks at the grad mode and not at the module's training flag.
  if (impl_->config.broadcast_buffers && impl_->last_forward_synchronised && several) {
    std::vector<at::Tensor> buffers;
    for (const auto& buffer : named_buffers()) buffers.push_back(buffer.second);
    if (!buffers.empty()) broadcast_coalesced(*impl_->state, buffers);
  }
  // Accelerate's accumulate(): DDP skips the all-reduce unless this step syncs or sync_each_batch is set.
  const bool synchronises = grad_enabled && !impl_->no_sync &&
                            (impl_->state->sync_gradients() || impl_->state->options().get_bool("sync_each_batch"));
  if (impl_->reducer && grad_enabled) impl_->reducer->prepare_for_backward(synchronises);
  if (grad_enabled) {
    impl_->backward_synchronises = synchronises;
    impl_->reduced.assign(impl_->reduced.size(), false);
  }
  impl_->last_forward_synchronised = synchronises;
}

ModelOutput Model::forward(const std::vector<at::Tensor>& args, const NamedTensors& kwargs, bool grad_enabled) {
  const timeline::Span span(grad_enabled ? "forward" : "evaluate");
  c10::AutoGradMode grad_mode(grad_enabled);
  // A forward accel cannot run is refused before begin_forward's broadcast, which is collective.
  if (impl_->body->host_owned()) impl_->body->forward({}, {});
  start_forward(grad_enabled);
  std::vector<c10::IValue> inputs(args.begin(), args.end());
  std::unordered_map<std::string, c10::IValue> named;
  for (const auto& [name, tensor] : kwargs) named.emplace(name, tensor);
  const std::string precision = impl_->state ? impl_->state->options().get_string("mixed_precision") : "no";
  const std::string device = impl_->state ? impl_->state->device() : "cpu";
  c10::IValue result;
  bool autocast = false;
  const bool cut = impl_->gathered && !impl_->cut.empty();
  const bool prefetching = impl_->config.reducer.unit_prefetch;
  if (impl_->gathered) {
    impl_->gathered->begin_forward(grad_enabled);
    impl_->gathered->hold(impl_->held, grad_enabled, prefetching);  // every unit when nothing is cut
  }
  {
    AutocastScope scope(precision, device);
    autocast = scope.active();
    if (cut) {
      const CutChildren& children = impl_->cut;
      result = impl_->body->forward_around(
          std::move(inputs), named,
          [&](size_t k) {
            impl_->gathered->before_child(children[k].second,
                                          prefetching ? units_ahead(children, k, +1) : std::vector<size_t>());
          },
          [&](size_t k, const at::Tensor& output) {
            impl_->gathered->after_child(children[k].second,
                                         prefetching ? units_ahead(children, k, -1) : std::vector<size_t>(), output,
                                         grad_enabled);
          });
    } else {
      result = impl_->body->forward(std::move(inputs), named);
    }
  }
  if (impl_->gathered) impl_->gathered->after_forward(grad_enabled);
  return convert(result, autocast && !impl_->config.keep_low_precision_outputs);
}

bool Model::host_owned() const { return impl_->body->host_owned(); }

void Model::require_prepared_host_model(const char* what) const {
  if (!impl_->body->host_owned()) {
    fail(Code::InvalidState, std::string(what) + ": accel runs this model's forward and backward itself (a "
                                                 "TorchScript model); only a model made from the caller's tensors is "
                                                 "told about them");
  }
  if (!impl_->state) fail(Code::InvalidState, std::string(what) + ": prepare the model (accel_state_prepare_model) first");
}

namespace {

// parameters[index], or Error(OutOfRange) naming `what` and the count.
const NamedTensors::value_type& parameter_at(const NamedTensors& parameters, size_t index, const char* what) {
  if (index >= parameters.size()) {
    fail(Code::OutOfRange, std::string(what) + ": parameter " + std::to_string(index) + " out of range (the model has " +
                               std::to_string(parameters.size()) + ")");
  }
  return parameters[index];
}

}  // namespace

size_t Model::trainable_index(size_t index, const char* what) const {
  const auto& parameters = named_parameters();
  parameter_at(parameters, index, what);
  require_prepared_host_model(what);
  if (!parameters[index].second.requires_grad()) {
    fail(Code::InvalidArgument, std::string(what) + ": parameter '" + parameters[index].first + "' is not trainable");
  }
  size_t trainable = 0;
  for (size_t i = 0; i < index; ++i) trainable += parameters[i].second.requires_grad() ? 1 : 0;
  return trainable;
}

void Model::refuse_under_units(const char* what) const {
  if (impl_->units) {
    fail(Code::InvalidState, std::string(what) + ": under zero_stage 3 the gradients are handed over a unit at a time "
                                                 "(reduce_unit), not kept per parameter");
  }
}

at::Tensor Model::grad_view(size_t index) const {
  trainable_index(index, "grad_view");
  refuse_under_units("grad_view");
  return named_parameters()[index].second.grad();
}

void Model::grad_ready(size_t index) {
  const size_t trainable = trainable_index(index, "grad_ready");
  refuse_under_units("grad_ready");
  if (impl_->reducer) impl_->reducer->mark_ready(trainable);
}

bool Model::grad_reached_by_no_rank(size_t index) const {
  const size_t trainable = trainable_index(index, "grad_reached_by_no_rank");
  return impl_->reducer && impl_->reducer->reached_by_no_rank(trainable);
}

void Model::end_backward() {
  require_prepared_host_model("end_backward");
  if (const ZeroPartition* zero = zero_partition(); zero != nullptr) require_optimizer_for(*zero);
  check_units_after_backward("end_backward");
  if (impl_->reducer) impl_->reducer->finish_backward();
}

std::vector<bool> Model::units_reached_by_no_rank(const std::vector<bool>& reached) {
  std::vector<bool>& since = impl_->reached_since_sync;
  since.resize(reached.size(), false);
  for (size_t u = 0; u < reached.size(); ++u) since[u] = since[u] || reached[u];
  std::vector<bool> by_no_rank(reached.size(), false);
  if (!impl_->backward_synchronises) return by_no_rank;
  const std::vector<bool> local = std::exchange(since, std::vector<bool>(reached.size(), false));
  if (!impl_->config.reducer.find_unused_parameters) return by_no_rank;
  at::Tensor anywhere = at::empty({static_cast<int64_t>(local.size())}, at::kFloat);
  float* flags = anywhere.data_ptr<float>();
  for (size_t u = 0; u < local.size(); ++u) flags[u] = local[u] ? 1.0f : 0.0f;
  const char* what = "ZeRO-3 units reached by the backward";
  if (auto* group = impl_->state->group(what)) group->transport().allreduce(anywhere, distributed::ReduceKind::Max, what);
  for (size_t u = 0; u < local.size(); ++u) {
    by_no_rank[u] = flags[u] == 0.0f;
    if (by_no_rank[u]) impl_->reduced[u] = true;  // agreed by every rank: no reduction to pair
  }
  return by_no_rank;
}

void Model::check_units_after_backward(const char* what) {
  if (!impl_->units) return;
  // A prefetch left in flight carries the shares of before the coming step.
  impl_->units->discard_prefetches();
  if (!impl_->backward_synchronises) return;
  std::string missing;
  for (size_t u = 0; u < impl_->reduced.size(); ++u) {
    if (!impl_->reduced[u]) missing += (missing.empty() ? "" : ", ") + std::to_string(u);
  }
  if (!missing.empty()) {
    fail(Code::InvalidState, std::string(what) + ": a synchronising backward ended without the gradients of unit(s) " +
                                 missing + " (reduce_unit every unit, with zeros for one the backward did not "
                                 "reach, so that every rank reduces the same units)");
  }
  // Before any optimizer step takes gradients that a unit's reduction may have paired with another's.
  impl_->units->require_ranks_in_step(what);
}

void Model::require_optimizer_for(const ZeroPartition& zero) const {
  if (!has_accel_optimizer()) {
    fail(Code::Unsupported, "zero_stage " + std::to_string(zero.stage) +
                                " on a model of the caller's tensors needs an accel optimizer over it "
                                "(accel_optimizer_new, or accel_optimizer_new_external to step the share of each "
                                "rank with the caller's own optimizer): the caller's optimizer alone would step "
                                "every parameter, while each rank updates only its share");
  }
}

void Model::train(bool on) { impl_->body->train(on); }
bool Model::is_training() const { return impl_->body->is_training(); }
void Model::set_no_sync(bool on) { impl_->no_sync = on; }
bool Model::no_sync() const { return impl_->no_sync; }

namespace {

// A module lists a tensor that several submodules hold once per holder: the same TensorImpl in each slot.
// torch's named_parameters keeps the first.
Model::Impl::Slots slots_of(const NamedTensors& list) {
  Model::Impl::Slots slots;
  std::set<const c10::TensorImpl*> seen;
  for (const auto& [name, tensor] : list) {
    if (seen.insert(tensor.unsafeGetTensorImpl()).second) {
      slots.unique_slots.push_back(slots.every.size());
      slots.unique.emplace_back(name, tensor);
    }
    slots.every.emplace_back(name, tensor);
  }
  return slots;
}

void refresh(Model::Impl::Slots& slots, const NamedTensors& list) {
  for (size_t i = 0; i < list.size(); ++i) slots.every[i].second = list[i].second;
  for (size_t u = 0; u < slots.unique.size(); ++u) slots.unique[u].second = slots.every[slots.unique_slots[u]].second;
}

}  // namespace

void Model::list_tensors() const {
  if (!impl_->parameters) impl_->parameters = slots_of(impl_->body->parameter_slots());
  if (!impl_->buffers) impl_->buffers = slots_of(impl_->body->buffer_slots());
}

void Model::refresh_cached_tensors() {
  // Only the tensors change: names handed out through the C API stay valid. Moving to a device keeps
  // each TensorImpl (set_data), so tied slots stay one tensor.
  if (impl_->parameters) refresh(*impl_->parameters, impl_->body->parameter_slots());
  if (impl_->buffers) refresh(*impl_->buffers, impl_->body->buffer_slots());
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
  if (impl_->units) {
    fail(Code::Unsupported, "parameters_and_buffers: under zero_stage 3 each process holds its share of each trainable "
                            "parameter only; for_each_gathered_parameter gathers them");
  }
  return tensor_slots();
}

std::vector<at::Tensor> Model::sharded_parameters() const {
  return impl_->units ? impl_->units->parameters_in_unit_order() : std::vector<at::Tensor>{};
}

void Model::for_each_gathered_parameter(bool keep,
                                        const std::function<void(const at::Tensor&, const at::Tensor&)>& each) const {
  if (impl_->units) impl_->units->for_each_whole(keep, each);
}

bool Model::is_sharded(const at::Tensor& parameter) const { return impl_->units && impl_->units->holds(parameter); }

void Model::assign_sharded(const at::Tensor& parameter,
                           const std::function<void(int64_t, const at::Tensor&)>& fill) const {
  if (!impl_->units) fail(Code::InvalidArgument, "assign_sharded: the model shards no parameter");
  impl_->units->assign(parameter, fill);
}

void Model::set_parameter(size_t index, const at::Tensor& value) const {
  const auto& [name, parameter] = parameter_at(named_parameters(), index, "set_parameter");
  if (value.sizes() != parameter.sizes()) {
    fail(Code::ShapeMismatch, "set_parameter: '" + name + "' has shape " + shape_string(parameter.sizes()) +
                                  ", the value " + shape_string(value.sizes()));
  }
  if (value.is_complex() && !parameter.is_complex()) {
    fail(Code::Dtype, "set_parameter: '" + name + "' is " + c10::toString(parameter.scalar_type()) +
                          ", the value complex (" + c10::toString(value.scalar_type()) + ")");
  }
  const c10::NoGradGuard no_grad;
  if (!is_sharded(parameter)) {
    parameter.copy_(value);
    return;
  }
  const at::Tensor flat = value.reshape({-1});
  assign_sharded(parameter, [&](int64_t begin, const at::Tensor& share) {
    share.copy_(flat.narrow(0, begin, share.numel()));
  });
}

std::pair<int64_t, at::Tensor> Model::sharded_share(const at::Tensor& parameter) const {
  if (!impl_->units) fail(Code::InvalidArgument, "sharded_share: the model shards no parameter");
  return impl_->units->share_of(parameter);
}

bool Model::checkpoint_in_pieces() const {
  using CheckpointModel = PrepareConfig::CheckpointModel;
  const CheckpointModel chosen = impl_->config.checkpoint_model;
  return chosen == CheckpointModel::Pieces || (chosen == CheckpointModel::Auto && impl_->units != nullptr);
}

void Model::set_checkpoint_in_pieces(bool in_pieces) {
  if (!prepared()) fail(Code::InvalidState, "checkpoint_model: the model is not prepared (give the prepare option)");
  impl_->config.checkpoint_model = in_pieces ? PrepareConfig::CheckpointModel::Pieces : PrepareConfig::CheckpointModel::Whole;
}

NamedTensors Model::tensor_slots() const {
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

const ZeroPartition* Model::zero_partition() const {
  if (impl_->units) return &impl_->units->partition();
  if (impl_->offloaded_alone) return impl_->offloaded_alone.get();
  if (!impl_->reducer || impl_->reducer->zero_partition().stage == 0) return nullptr;
  return &impl_->reducer->zero_partition();
}

void Model::note_accel_optimizer(std::function<int64_t()> state_bytes) const {
  std::lock_guard<std::mutex> lock(impl_->optimizers_mutex);
  impl_->optimizer_state_bytes.push_back(std::move(state_bytes));
}

bool Model::has_accel_optimizer() const {
  std::lock_guard<std::mutex> lock(impl_->optimizers_mutex);
  return !impl_->optimizer_state_bytes.empty();
}

GradSyncReport Model::grad_sync_report() const {
  GradSyncReport report = impl_->reducer ? impl_->reducer->sync_report() : GradSyncReport{};
  if (impl_->units) {
    report.gradient_bytes = impl_->units->gradient_bytes();
    const ShardedUnits::GatherFigures gathers = impl_->units->gather_figures();
    report.unit_gathers = gathers.gathers;
    report.unit_prefetches = gathers.prefetches;
    report.unit_gather_wait_ms = gathers.wait_ms;
  }
  std::lock_guard<std::mutex> lock(impl_->optimizers_mutex);
  for (const auto& state_bytes : impl_->optimizer_state_bytes) report.optimizer_state_bytes += state_bytes();
  return report;
}

std::shared_ptr<Model> Model::unwrap() const {
  refuse_gathered_units("unwrap");
  return std::shared_ptr<Model>(new Model(around(impl_->body)));
}

void Model::save_torchscript(const std::string& path) const {
  refuse_gathered_units("save_torchscript");
  impl_->body->save_torchscript(path);
}

void Model::refuse_gathered_units(const char* what) const {
  if (impl_->gathered) {
    fail(Code::Unsupported, std::string(what) + ": under zero_stage 3 this TorchScript model's parameters are held as "
                                                "each process's share, gathered only around its forward; write them "
                                                "whole with save_model (accel_state_save_model)");
  }
}

const std::shared_ptr<distributed::State>& Model::state() const { return impl_->state; }

}  // namespace accel::train
