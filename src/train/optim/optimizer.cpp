#include "train/optim/optimizer.hpp"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/serialize.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "core/error.hpp"
#include "core/options.hpp"
#include "train/optim/archive.hpp"
#include "train/optim/capturable_optimizer.hpp"
#include "train/optim/zero_optimizer.hpp"
#include "train/optim/zero_state.hpp"

namespace accel::train {
namespace {

// Marks the shared bytes of a state saved per process (Optimizer::save_state_per_process).
constexpr const char* kPerProcessKey = "accel/state_per_process";

bool marked_per_process(torch::serialize::InputArchive& archive) {
  c10::IValue flag;
  return archive.try_read(kPerProcessKey, flag) && flag.isBool() && flag.toBool();
}

using TorchOptions = torch::optim::OptimizerOptions;
// The group options an archive holds, each with the (saved) keys of its parameters.
using SavedGroups = std::vector<std::pair<std::vector<std::string>, std::unique_ptr<TorchOptions>>>;

// One parameter group before it becomes a torch::optim::OptimizerParamGroup.
struct Group {
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
  double weight_decay;
};

torch::optim::SGDOptions sgd_options(const OptimizerConfig& config, double weight_decay) {
  return torch::optim::SGDOptions(config.lr)
      .momentum(config.momentum)
      .dampening(config.dampening)
      .nesterov(config.nesterov)
      .weight_decay(weight_decay);
}

template <typename Options>
Options adam_family_options(const OptimizerConfig& config, double weight_decay) {
  return Options(config.lr).betas(std::make_tuple(config.beta1, config.beta2)).eps(config.eps).weight_decay(weight_decay);
}

// Every group gets its own options so that the no-decay group keeps weight_decay 0.
template <typename TorchOptimizer, typename Options, Options (*make_options)(const OptimizerConfig&, double)>
std::unique_ptr<torch::optim::Optimizer> build(const std::vector<Group>& groups, const OptimizerConfig& config) {
  std::vector<torch::optim::OptimizerParamGroup> torch_groups;
  for (const auto& group : groups) {
    torch_groups.emplace_back(group.params, std::make_unique<Options>(make_options(config, group.weight_decay)));
  }
  return std::make_unique<TorchOptimizer>(std::move(torch_groups), make_options(config, config.weight_decay));
}

template <typename Options>
double weight_decay_of(const TorchOptions& options) {
  return static_cast<const Options&>(options).weight_decay();
}

double sgd_momentum(const TorchOptions& options) {
  return static_cast<const torch::optim::SGDOptions&>(options).momentum();
}

void set_sgd_momentum(TorchOptions& options, double momentum) {
  static_cast<torch::optim::SGDOptions&>(options).momentum(momentum);
}

template <typename Options>
std::pair<double, double> betas_of(const TorchOptions& options) {
  const auto betas = static_cast<const Options&>(options).betas();
  return {std::get<0>(betas), std::get<1>(betas)};
}

template <typename Options>
double beta1_of(const TorchOptions& options) {
  return betas_of<Options>(options).first;
}

template <typename Options>
void set_beta1(TorchOptions& options, double beta1) {
  auto& typed = static_cast<Options&>(options);
  typed.betas(std::make_tuple(beta1, std::get<1>(typed.betas())));
}

template <typename Options>
SavedGroups read_saved_groups(torch::serialize::InputArchive& archive) {
  torch::serialize::InputArchive groups_archive;
  archive.read("param_groups", groups_archive);
  SavedGroups groups;
  torch::optim::detail::serialize<Options>(groups_archive, groups);
  return groups;
}

// What differs between the kinds; the table below is also the list of known kinds.
struct KindTraits {
  const char* name;
  std::unique_ptr<torch::optim::Optimizer> (*build)(const std::vector<Group>&, const OptimizerConfig&);
  double (*weight_decay)(const TorchOptions&);
  SavedGroups (*read_saved_groups)(torch::serialize::InputArchive&);
  double (*momentum)(const TorchOptions&);
  void (*set_momentum)(TorchOptions&, double);
  std::pair<double, double> (*betas)(const TorchOptions&);  // nullptr: the kind has no betas
};

const KindTraits kKinds[] = {
    {"sgd", &build<torch::optim::SGD, torch::optim::SGDOptions, &sgd_options>,
     &weight_decay_of<torch::optim::SGDOptions>, &read_saved_groups<torch::optim::SGDOptions>, &sgd_momentum,
     &set_sgd_momentum, nullptr},
    {"adam",
     &build<torch::optim::Adam, torch::optim::AdamOptions, &adam_family_options<torch::optim::AdamOptions>>,
     &weight_decay_of<torch::optim::AdamOptions>, &read_saved_groups<torch::optim::AdamOptions>,
     &beta1_of<torch::optim::AdamOptions>, &set_beta1<torch::optim::AdamOptions>,
     &betas_of<torch::optim::AdamOptions>},
    {"adamw",
     &build<torch::optim::AdamW, torch::optim::AdamWOptions, &adam_family_options<torch::optim::AdamWOptions>>,
     &weight_decay_of<torch::optim::AdamWOptions>, &read_saved_groups<torch::optim::AdamWOptions>,
     &beta1_of<torch::optim::AdamWOptions>, &set_beta1<torch::optim::AdamWOptions>,
     &betas_of<torch::optim::AdamWOptions>},
};

const KindTraits& traits_for(const std::string& kind) {
  std::string known;
  for (const auto& traits : kKinds) {
    if (kind == traits.name) return traits;
    known += std::string(known.empty() ? "" : ", ") + traits.name;
  }
  fail(Code::InvalidArgument, "unknown optimizer '" + kind + "' (known: " + known + ")");
}

// The checks torch::optim makes with TORCH_CHECK, made first so the error names the key.
void validate_config(const std::string& kind, const OptimizerConfig& config) {
  require_argument(config.lr >= 0, "optimizer lr must be >= 0, got " + format_number(config.lr));
  require_argument(config.weight_decay >= 0, "optimizer weight_decay must be >= 0, got " + format_number(config.weight_decay));
  if (kind == "sgd") {
    validate_momentum(kind, config.momentum, "optimizer momentum");
    require_argument(!config.nesterov || (config.momentum > 0 && config.dampening == 0),
            "optimizer nesterov requires momentum > 0 and dampening 0 (momentum " + format_number(config.momentum) +
                ", dampening " + format_number(config.dampening) + ")");
    return;
  }
  validate_momentum(kind, config.beta1, "optimizer beta1");
  require_argument(config.beta2 >= 0 && config.beta2 < 1, "optimizer beta2 must be in [0, 1), got " + format_number(config.beta2));
  require_argument(config.eps >= 0, "optimizer eps must be >= 0, got " + format_number(config.eps));
}

void validate_parameters(const std::vector<std::pair<std::string, at::Tensor>>& named_parameters) {
  require_argument(!named_parameters.empty(), "optimizer got an empty parameter list");
  std::set<std::string> names;
  std::map<const void*, std::string> tensors;
  for (const auto& [name, tensor] : named_parameters) {
    require_argument(tensor.defined(), "parameter '" + name + "' is an undefined tensor");
    require_argument(tensor.is_leaf(), "parameter '" + name + "' is not a leaf tensor (can't optimize a non-leaf tensor)");
    require_argument(names.insert(name).second, "parameter name '" + name + "' appears more than once");
    const auto [seen, inserted] = tensors.emplace(tensor.unsafeGetTensorImpl(), name);
    require_argument(inserted, "parameters '" + seen->second + "' and '" + name + "' are the same tensor");
  }
}

bool matches_any(const std::vector<std::string>& patterns, const std::string& name) {
  for (const auto& pattern : patterns) {
    if (glob_match(pattern, name)) return true;
  }
  return false;
}

std::vector<Group> split_groups(const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
                                const OptimizerConfig& config) {
  Group decay{{}, {}, config.weight_decay};
  Group no_decay{{}, {}, 0.0};
  for (const auto& [name, tensor] : named_parameters) {
    Group& group = matches_any(config.no_decay_patterns, name) ? no_decay : decay;
    group.names.push_back(name);
    group.params.push_back(tensor);
  }
  std::vector<Group> groups;
  for (auto* group : {&decay, &no_decay}) {
    if (!group->params.empty()) groups.push_back(std::move(*group));
  }
  return groups;
}


}  // namespace

void validate_momentum(const std::string& kind, double momentum, const std::string& what) {
  if (kind == "sgd") {
    require_argument(momentum >= 0, what + " must be >= 0, got " + format_number(momentum));
    return;
  }
  require_argument(momentum >= 0 && momentum < 1,
                   what + " must be in [0, 1) for " + kind + " (its beta1), got " + format_number(momentum));
}

bool glob_match(const std::string& pattern, const std::string& name) {
  // Greedy match that backtracks only to the last '*', which is enough for '*' and '?'.
  size_t p = 0, n = 0, star = std::string::npos, star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_n = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

struct Optimizer::Impl {
  std::string kind;
  const KindTraits* traits;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<std::vector<std::string>> names;  // per group, parallel to the group's params
  std::vector<double> initial_lrs;
  std::unique_ptr<CapturableOptimizer> capturable;
  int64_t state_generation = 0;
  bool zero_grad_to_none = true;
  OptimizerConfig config;
  std::shared_ptr<ZeroShard> zero;
  // Under ZeRO: an optimizer of the same kind over this rank's pieces, which holds the state and steps.
  std::unique_ptr<torch::optim::Optimizer> pieces;
  std::atomic<int64_t> state_bytes{0};
  std::vector<OwnedElements> owned;

  int64_t count_state_bytes() const;

  void refuse_if_external(const char* what) const {
    if (config.external_step) {
      fail(Code::Unsupported, std::string(what) + ": this optimizer is stepped by the caller's own, which holds the "
                                                  "state: save and load that one");
    }
  }

  std::string own_state(bool per_process = false) const {
    torch::serialize::OutputArchive archive;
    optimizer->save(archive);
    archive.write("accel/kind", c10::IValue(kind));
    archive.write("accel/initial_lrs", c10::IValue(initial_lrs));
    if (per_process) archive.write(kPerProcessKey, c10::IValue(true));
    return archive_bytes(archive);
  }

  // Every parameter with its name, in group order.
  NamedTensors named_parameters() const {
    NamedTensors named;
    const auto& groups = optimizer->param_groups();
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t p = 0; p < groups[g].params().size(); ++p) named.emplace_back(names[g][p], groups[g].params()[p]);
    }
    return named;
  }

  // Under ZeRO, the name this optimizer gives each of the shard's parameters ("" for one it does not hold).
  std::vector<std::string> shard_names() const {
    std::unordered_map<const c10::TensorImpl*, std::string> by_tensor;
    for (const auto& [name, parameter] : named_parameters()) by_tensor.emplace(parameter.unsafeGetTensorImpl(), name);
    std::vector<std::string> shard;
    for (const auto& entry : zero->parameters()) {
      const auto found = by_tensor.find(entry.second.unsafeGetTensorImpl());
      shard.push_back(found == by_tensor.end() ? std::string() : found->second);
    }
    return shard;
  }

  // The pieces' groups take their options from the whole parameters' groups, where lr schedules and
  // load_state put them.
  void copy_options_to_pieces() {
    auto& groups = optimizer->param_groups();
    for (size_t i = 0; i < groups.size(); ++i) pieces->param_groups()[i].set_options(groups[i].options().clone());
  }

  size_t checked(size_t index) const {
    const auto count = optimizer->param_groups().size();
    if (index >= count) {
      fail(Code::OutOfRange, "parameter group " + std::to_string(index) + " out of range (the optimizer has " +
                                 std::to_string(count) + ")");
    }
    return index;
  }

  torch::optim::OptimizerParamGroup& group(size_t index) const { return optimizer->param_groups()[checked(index)]; }

  // The group options and initial lrs of a saved state, checked against this optimizer before anything
  // changes.
  std::pair<SavedGroups, std::vector<double>> read_checked(torch::serialize::InputArchive& archive) const {
    c10::IValue saved_kind;
    require_argument(archive.try_read("accel/kind", saved_kind) && saved_kind.isString(),
            "optimizer state has no optimizer kind");
    require_argument(saved_kind.toStringRef() == kind,
            "optimizer state is for '" + saved_kind.toStringRef() + "', this optimizer is '" + kind + "'");
    c10::IValue saved_initial_lrs;
    require_argument(archive.try_read("accel/initial_lrs", saved_initial_lrs) && saved_initial_lrs.isDoubleList(),
            "optimizer state has no initial lrs");
    SavedGroups groups;
    try {
      groups = traits->read_saved_groups(archive);
    } catch (const c10::Error& error) {
      fail_from(error, Code::InvalidArgument, "optimizer state has unreadable parameter groups: ");
    }
    auto initial = saved_initial_lrs.toDoubleVector();
    require_argument(groups.size() == names.size() && initial.size() == names.size(),
            "optimizer state has " + std::to_string(groups.size()) + " parameter groups, this optimizer has " +
                std::to_string(names.size()));
    for (size_t i = 0; i < groups.size(); ++i) {
      require_argument(groups[i].first.size() == names[i].size(),
              "optimizer state's parameter group " + std::to_string(i) + " has " +
                  std::to_string(groups[i].first.size()) + " parameters, this optimizer's has " +
                  std::to_string(names[i].size()));
    }
    return {std::move(groups), std::move(initial)};
  }

  // Runs `read` (torch::optim's parsing of a saved state, which writes into the optimizer) with the
  // optimizer's per-parameter state and group options set aside and put back afterwards, whatever happens:
  // the state read is taken out by `read` itself. A c10::Error becomes Error(InvalidArgument).
  void set_aside_while(const std::function<void()>& read) {
    OptimizerStates previous;
    std::swap(previous, optimizer->state());
    std::vector<std::unique_ptr<TorchOptions>> options;
    for (auto& group : optimizer->param_groups()) options.push_back(group.options().clone());
    const auto put_back = [&] {
      std::swap(previous, optimizer->state());
      for (size_t i = 0; i < options.size(); ++i) optimizer->param_groups()[i].set_options(std::move(options[i]));
    };
    try {
      read();
    } catch (const c10::Error& error) {
      put_back();
      fail_from(error, Code::InvalidArgument, "optimizer state is unreadable: ");
    } catch (...) {
      put_back();
      throw;
    }
    put_back();
  }
};

Optimizer::Optimizer(const std::string& kind, const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
                     const OptimizerConfig& config)
    : impl_(std::make_unique<Impl>()) {
  impl_->kind = kind;
  impl_->traits = &traits_for(kind);
  validate_config(kind, config);
  validate_parameters(named_parameters);
  const auto groups = split_groups(named_parameters, config);
  impl_->optimizer = impl_->traits->build(groups, config);
  impl_->zero_grad_to_none = config.zero_grad_to_none;
  impl_->config = config;
  for (const auto& group : groups) {
    impl_->names.push_back(group.names);
    impl_->initial_lrs.push_back(config.lr);
    for (size_t p = 0; p < group.names.size(); ++p) impl_->owned.push_back({group.names[p], 0, group.params[p].numel()});
  }
}

Optimizer::~Optimizer() = default;

void Optimizer::step() {
  // The step counts a captured step advanced on the device are the ones this step must continue from.
  if (impl_->capturable) impl_->capturable->write_back();
  if (impl_->config.external_step) {
    if (impl_->zero) {
      impl_->zero->step(impl_->config.external_step);
    } else {
      impl_->config.external_step();
    }
  } else if (impl_->zero) {
    impl_->zero->step([this] {
      impl_->copy_options_to_pieces();
      impl_->pieces->step();
    });
  } else {
    impl_->optimizer->step();
  }
  if (impl_->capturable) impl_->capturable->invalidate();
  impl_->state_bytes = impl_->count_state_bytes();
}

void Optimizer::zero_grad() {
  if (impl_->zero) impl_->zero->forget_gradients(impl_->zero_grad_to_none);
  for (const auto& group : impl_->optimizer->param_groups()) {
    for (auto param : group.params()) {
      if (!param.grad().defined()) continue;
      if (impl_->zero_grad_to_none) {
        param.mutable_grad() = at::Tensor();
      } else {
        param.mutable_grad().zero_();
      }
    }
  }
}

size_t Optimizer::num_groups() const { return impl_->optimizer->param_groups().size(); }

double Optimizer::lr(size_t group) const { return impl_->group(group).options().get_lr(); }

void Optimizer::set_lr(size_t group, double lr) {
  require_argument(std::isfinite(lr) && lr >= 0, "optimizer lr must be finite and >= 0, got " + format_number(lr) + " for group " + std::to_string(group));
  assign_lr(group, lr);
}

void Optimizer::assign_lr(size_t group, double lr) { impl_->group(group).options().set_lr(lr); }

double Optimizer::initial_lr(size_t group) const {
  return impl_->initial_lrs[impl_->checked(group)];
}

double Optimizer::weight_decay(size_t group) const {
  return impl_->traits->weight_decay(impl_->group(group).options());
}

double Optimizer::momentum(size_t group) const { return impl_->traits->momentum(impl_->group(group).options()); }

void Optimizer::assign_momentum(size_t group, double momentum) {
  impl_->traits->set_momentum(impl_->group(group).options(), momentum);
}

std::pair<double, double> Optimizer::betas(size_t group) const {
  const auto& options = impl_->group(group).options();
  require_argument(impl_->traits->betas != nullptr, "a " + impl_->kind + " optimizer has no betas (adam and adamw have)");
  return impl_->traits->betas(options);
}

std::vector<std::string> Optimizer::group_parameter_names(size_t group) const {
  return impl_->names[impl_->checked(group)];
}

std::vector<at::Tensor> Optimizer::parameters() const {
  std::vector<at::Tensor> all;
  for (const auto& group : impl_->optimizer->param_groups()) {
    all.insert(all.end(), group.params().begin(), group.params().end());
  }
  return all;
}

const std::string& Optimizer::kind() const { return impl_->kind; }

std::string Optimizer::save_state() const {
  impl_->refuse_if_external("save_state");
  if (impl_->capturable) impl_->capturable->write_back();
  if (!impl_->zero) return impl_->own_state();
  // Every rank's pieces assembled into whole parameters' state, saved, then dropped again.
  try {
    const auto parts = impl_->zero->gather_bytes(piece_states(*impl_->zero, *impl_->pieces, impl_->shard_names()).bytes);
    assemble_piece_states([&](size_t process) { return parts[process]; }, parts.size(), impl_->named_parameters(),
                          *impl_->optimizer, impl_->kind);
    const std::string whole = impl_->own_state();
    impl_->optimizer->state().clear();
    return whole;
  } catch (...) {
    impl_->optimizer->state().clear();
    throw;
  }
}

Optimizer::PerProcessState Optimizer::save_state_per_process() const {
  impl_->refuse_if_external("save_state");
  if (impl_->capturable) impl_->capturable->write_back();
  if (!impl_->zero) return {impl_->own_state(), std::string(), std::string()};
  // Under ZeRO the whole parameters' optimizer holds no per-parameter state: its archive is the options.
  auto own = piece_states(*impl_->zero, *impl_->pieces, impl_->shard_names());
  return {impl_->own_state(/*per_process=*/true), std::move(own.bytes), std::move(own.index)};
}

struct Optimizer::PendingState::Impl {
  SavedGroups groups;
  std::vector<double> initial_lrs;
  OptimizerStates states;  // the whole parameters' state, or under ZeRO this rank's pieces'
};

Optimizer::PendingState::PendingState() = default;
Optimizer::PendingState::PendingState(PendingState&&) noexcept = default;
Optimizer::PendingState& Optimizer::PendingState::operator=(PendingState&&) noexcept = default;
Optimizer::PendingState::~PendingState() = default;

void Optimizer::load_state(const std::string& bytes) { load_state(bytes, {}); }

void Optimizer::load_state(const std::string& shared, const std::vector<std::string>& process_parts) {
  load_state(read_state(shared, [&](size_t process) { return process_parts[process]; }, process_parts.size()));
}

Optimizer::PendingState Optimizer::read_state(const std::string& shared, const PartReader& read_part, size_t num_parts,
                                              const PartIndexReader& read_index) {
  impl_->refuse_if_external("load_state");
  // Saved state tensors go where the state lives: with the parameters (Accelerate moves them to the device as
  // well), or under ZeRO with the pieces stepped, in host memory when stage 3 offloads its shares.
  const bool pieces = impl_->zero && !impl_->zero->views().empty();
  const c10::Device device = pieces ? impl_->zero->views().front().device() : parameters().front().device();
  auto archive = read_archive(shared, "optimizer", device);
  auto [groups, initial_lrs] = impl_->read_checked(archive);
  const bool per_process = marked_per_process(archive);
  require_argument(!per_process || num_parts > 0,
                   "optimizer state was saved by each process under ZeRO, and no process's part was given");
  PendingState pending;
  pending.impl_ = std::make_unique<PendingState::Impl>();
  pending.impl_->groups = std::move(groups);
  pending.impl_->initial_lrs = std::move(initial_lrs);
  impl_->set_aside_while([&] {
    // Under ZeRO the per-process parts are cut as they are read, never assembled whole.
    if (per_process && impl_->zero) {
      pending.impl_->states =
          cut_saved_pieces(read_part, num_parts, *impl_->zero, impl_->shard_names(), impl_->kind, device, read_index);
      return;
    }
    impl_->optimizer->load(archive);
    if (per_process) assemble_piece_states(read_part, num_parts, impl_->named_parameters(), *impl_->optimizer, impl_->kind);
    if (impl_->zero) {
      pending.impl_->states = cut_piece_states(*impl_->zero, *impl_->optimizer);
    } else {
      std::swap(pending.impl_->states, impl_->optimizer->state());
    }
  });
  return pending;
}

void Optimizer::load_state(PendingState state) {
  auto& loaded = *state.impl_;
  std::swap(impl_->zero ? impl_->pieces->state() : impl_->optimizer->state(), loaded.states);
  impl_->state_bytes = impl_->count_state_bytes();
  auto& param_groups = impl_->optimizer->param_groups();
  for (size_t i = 0; i < loaded.groups.size(); ++i) param_groups[i].set_options(std::move(loaded.groups[i].second));
  impl_->initial_lrs = std::move(loaded.initial_lrs);
  ++impl_->state_generation;
  if (impl_->capturable) impl_->capturable->invalidate();
}

void Optimizer::attach_zero(std::shared_ptr<ZeroShard> shard) {
  std::vector<Group> groups;
  for (size_t i = 0; i < impl_->names.size(); ++i) {
    const auto& group = impl_->optimizer->param_groups()[i];
    Group pieces{{}, {}, impl_->traits->weight_decay(group.options())};
    for (size_t p = 0; p < group.params().size(); ++p) {
      for (const auto& piece : shard->pieces_of(group.params()[p])) {
        pieces.names.push_back(impl_->names[i][p]);
        pieces.params.push_back(piece);
      }
    }
    groups.push_back(std::move(pieces));
  }
  impl_->pieces = impl_->traits->build(groups, impl_->config);
  impl_->zero = std::move(shard);
  impl_->copy_options_to_pieces();
  impl_->owned.clear();
  const ZeroShard& zero = *impl_->zero;
  for (const ZeroPiece& piece : zero.pieces()) {
    impl_->owned.push_back({zero.parameters()[piece.parameter].first, piece.begin, piece.numel});
  }
}

const std::vector<OwnedElements>& Optimizer::owned_elements() const { return impl_->owned; }

at::Tensor Optimizer::owned_tensor(size_t index) const {
  if (index >= impl_->owned.size()) {
    fail(Code::OutOfRange, "piece " + std::to_string(index) + " out of range (the optimizer steps " +
                               std::to_string(impl_->owned.size()) + ")");
  }
  return impl_->zero ? impl_->zero->views()[index] : parameters()[index];
}

std::vector<at::Tensor> Optimizer::gradient_holders() {
  if (!impl_->zero || impl_->zero->stage() < 2) return parameters();
  return impl_->zero->gradient_pieces(parameters());
}

ZeroShard* Optimizer::zero_shard() const { return impl_->zero.get(); }

bool Optimizer::overflow_on_any_rank(bool found_inf) { return impl_->zero ? impl_->zero->any_rank(found_inf) : found_inf; }

int64_t Optimizer::state_bytes() const { return impl_->state_bytes.load(); }

int64_t Optimizer::Impl::count_state_bytes() const {
  const auto bytes = [](const at::Tensor& tensor) {
    return tensor.defined() ? tensor.numel() * static_cast<int64_t>(tensor.element_size()) : int64_t{0};
  };
  // Adam's and AdamW's states are two classes with the same three moments.
  const auto moments = [&](const auto& adam) {
    return bytes(adam.exp_avg()) + bytes(adam.exp_avg_sq()) + bytes(adam.max_exp_avg_sq());
  };
  int64_t total = 0;
  for (const auto& entry : (zero ? pieces : optimizer)->state()) {
    const auto* state = entry.second.get();
    if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(state)) {
      total += bytes(sgd->momentum_buffer());
    } else if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(state)) {
      total += moments(*adam);
    } else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(state)) {
      total += moments(*adamw);
    }
  }
  return total;
}

CapturableOptimizer& Optimizer::capturable() {
  impl_->refuse_if_external("a CUDA-graph step");
  if (impl_->zero) {
    fail(Code::Unsupported, "a CUDA graph cannot capture the step of an optimizer under zero_stage " +
                                std::to_string(impl_->zero->stage()) + " (its all-gather is not capturable); use zero_stage 0");
  }
  if (!impl_->capturable) impl_->capturable = std::make_unique<CapturableOptimizer>(*impl_->optimizer, impl_->kind);
  return *impl_->capturable;
}

int64_t Optimizer::state_generation() const { return impl_->state_generation; }

}  // namespace accel::train
