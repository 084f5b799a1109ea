#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "train/model/model_body.hpp"

namespace accel::train {
namespace {

class EagerModuleBody final : public ModelBody {
 public:
  EagerModuleBody(NamedTensors parameters, NamedTensors buffers)
      : parameters_(std::move(parameters)), buffers_(std::move(buffers)) {}

  NamedTensors parameter_slots() const override { return parameters_; }
  NamedTensors buffer_slots() const override { return buffers_; }

  // The caller's runtime owns these tensors and places them: accel only checks where they are.
  void to(const c10::Device& device, bool trainable_too) override {
    for (const auto* list : {&parameters_, &buffers_}) {
      for (const auto& [name, tensor] : *list) {
        const bool stays = list == &parameters_ && !trainable_too && tensor.requires_grad();
        if (!stays && tensor.device() != device) {
          fail(Code::InvalidArgument, "'" + name + "' is on " + tensor.device().str() + " but the state's device is " +
                                          device.str() + ": a model whose tensors are the caller's must be moved there "
                                          "by the caller before prepare (as Accelerate moves an nn.Module)");
        }
      }
    }
  }

  c10::IValue forward(std::vector<c10::IValue>, const std::unordered_map<std::string, c10::IValue>&) override {
    fail(Code::Unsupported, "this model's forward runs in the caller's runtime (its tensors are the caller's); "
                            "accel runs the forward of TorchScript models only");
  }

  void train(bool on) override { training_ = on; }
  bool is_training() const override { return training_; }

  void save_torchscript(const std::string&) const override {
    fail(Code::Unsupported, "a model whose tensors are the caller's has no TorchScript to save; save its weights "
                            "(accel_state_save_model) or the module in its own runtime");
  }

  bool host_owned() const override { return true; }

 private:
  NamedTensors parameters_;
  NamedTensors buffers_;
  bool training_ = true;
};

void check_tensors(const NamedTensors& tensors, const char* kind, std::set<std::string>& names) {
  for (const auto& [name, tensor] : tensors) {
    require_argument(!name.empty(), std::string("a ") + kind + " name is empty");
    require_utf8(name, std::string(kind) + " name");
    require_argument(names.insert(name).second, "'" + name + "' is given twice");
    require_argument(tensor.defined(), std::string(kind) + " '" + name + "' is an undefined tensor");
    require_argument(tensor.layout() == at::kStrided, std::string(kind) + " '" + name + "' is not a dense tensor");
  }
}

// Where a tensor's elements lie, in bytes of its device's memory: [begin, end).
struct Extent {
  uintptr_t begin = 0, end = 0;
  size_t slot = 0;  // its index among the parameters, then the buffers
};

std::optional<Extent> extent_of(const at::Tensor& tensor, size_t slot) {
  if (tensor.numel() == 0) return std::nullopt;
  int64_t last = 0;
  for (int64_t d = 0; d < tensor.dim(); ++d) last += (tensor.size(d) - 1) * tensor.stride(d);
  const auto begin = reinterpret_cast<uintptr_t>(tensor.data_ptr());
  return Extent{begin, begin + static_cast<uintptr_t>((last + 1) * static_cast<int64_t>(tensor.element_size())), slot};
}

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.device() == b.device() && a.scalar_type() == b.scalar_type() &&
         a.sizes() == b.sizes() && a.strides() == b.strides();
}

// For each slot, the first slot whose tensor is the same memory (itself when none is): a tensor given under
// several names, or the same memory through two handles (each DLPack import is a tensor of its own), is one
// tensor held twice (tied weights), as a module that holds one parameter in two places. Memory shared in
// part only is refused: stepping each would move the shared elements twice.
std::vector<size_t> tied_to(const NamedTensors& slots) {
  std::vector<size_t> first(slots.size());
  std::vector<Extent> extents;
  for (size_t i = 0; i < slots.size(); ++i) {
    first[i] = i;
    if (auto extent = extent_of(slots[i].second, i)) extents.push_back(*extent);
  }
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.slot < b.slot;
  });
  // Each extent against the earlier ones it may overlap: those that end after it begins.
  for (size_t i = 0; i < extents.size(); ++i) {
    for (size_t j = i; j-- > 0;) {
      const Extent &earlier = extents[j], &later = extents[i];
      if (earlier.end <= later.begin) continue;
      const auto &a = slots[earlier.slot], &b = slots[later.slot];
      if (a.second.device() != b.second.device()) continue;
      if (!same_view(a.second, b.second)) {
        fail(Code::InvalidArgument, "'" + a.first + "' and '" + b.first + "' share part of their memory: a tensor "
                                    "may be given under several names (tied weights, one parameter), but tensors "
                                    "that overlap otherwise would be updated twice where they overlap");
      }
      const size_t a_slot = std::min(earlier.slot, later.slot), b_slot = std::max(earlier.slot, later.slot);
      first[b_slot] = std::min(first[b_slot], first[a_slot]);
    }
  }
  // Ties found out of slot order point to the first slot of their memory.
  for (size_t i = 0; i < first.size(); ++i) first[i] = first[first[i]];
  return first;
}

}  // namespace

std::shared_ptr<ModelBody> eager_module_body(const NamedTensors& parameters, const std::vector<bool>& trainable,
                                     const NamedTensors& buffers) {
  require_argument(trainable.size() == parameters.size(), "one trainable flag per parameter is needed");
  std::set<std::string> names;
  check_tensors(parameters, "parameter", names);
  check_tensors(buffers, "buffer", names);
  NamedTensors slots = parameters;
  slots.insert(slots.end(), buffers.begin(), buffers.end());
  const std::vector<size_t> first = tied_to(slots);
  NamedTensors held;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const std::string& name = parameters[i].first;
    if (first[i] != i) {
      // The same tensor again: the model holds it twice, as one parameter.
      require_argument(first[i] < parameters.size(), "parameter '" + name + "' is the memory of buffer '" +
                                                         slots[first[i]].first + "'");
      require_argument(trainable[i] == trainable[first[i]],
                       "'" + parameters[first[i]].first + "' and '" + name +
                           "' are the same tensor, but only one of them is trainable");
      held.emplace_back(name, held[first[i]].second);
      continue;
    }
    // accel's own tensor over the caller's memory: whether it is trained is what the caller says, and its
    // gradient (set at prepare) is accel's to hold.
    auto tensor = parameters[i].second.detach();
    require_argument(!trainable[i] || at::isFloatingType(tensor.scalar_type()),
                     "parameter '" + name + "' is trainable but not floating (" + c10::toString(tensor.scalar_type()) +
                         ")");
    tensor.set_requires_grad(trainable[i]);
    held.emplace_back(name, tensor);
  }
  NamedTensors buffer_list;
  for (size_t b = 0; b < buffers.size(); ++b) {
    const size_t slot = parameters.size() + b;
    if (first[slot] < parameters.size()) {
      fail(Code::InvalidArgument, "buffer '" + buffers[b].first + "' is the memory of parameter '" +
                                      slots[first[slot]].first + "'");
    }
    buffer_list.emplace_back(buffers[b].first,
                             first[slot] == slot ? buffers[b].second.detach() : buffer_list[first[slot] - parameters.size()].second);
  }
  return std::make_shared<EagerModuleBody>(std::move(held), std::move(buffer_list));
}

}  // namespace accel::train
