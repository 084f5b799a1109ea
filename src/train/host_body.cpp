#include <set>

#include "core/error.hpp"
#include "train/model_body.hpp"

namespace accel::train {
namespace {

class HostBody final : public ModelBody {
 public:
  HostBody(NamedTensors parameters, NamedTensors buffers)
      : parameters_(std::move(parameters)), buffers_(std::move(buffers)) {}

  NamedTensors parameter_slots() const override { return parameters_; }
  NamedTensors buffer_slots() const override { return buffers_; }

  // The caller's runtime owns these tensors and places them: accel only checks where they are.
  void to(const c10::Device& device) override {
    for (const auto* list : {&parameters_, &buffers_}) {
      for (const auto& [name, tensor] : *list) {
        if (tensor.device() != device) {
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
    require_argument(names.insert(name).second, "'" + name + "' is given twice");
    require_argument(tensor.defined(), std::string(kind) + " '" + name + "' is an undefined tensor");
    require_argument(tensor.layout() == at::kStrided, std::string(kind) + " '" + name + "' is not a dense tensor");
  }
}

}  // namespace

std::shared_ptr<ModelBody> host_body(const NamedTensors& parameters, const std::vector<bool>& trainable,
                                     const NamedTensors& buffers) {
  require_argument(trainable.size() == parameters.size(), "one trainable flag per parameter is needed");
  std::set<std::string> names;
  check_tensors(parameters, "parameter", names);
  check_tensors(buffers, "buffer", names);
  NamedTensors held;
  for (size_t i = 0; i < parameters.size(); ++i) {
    // accel's own tensor over the caller's memory: whether it is trained is what the caller says, and its
    // gradient (set at prepare) is accel's to hold.
    auto tensor = parameters[i].second.detach();
    require_argument(!trainable[i] || at::isFloatingType(tensor.scalar_type()),
                     "parameter '" + parameters[i].first + "' is trainable but not floating (" +
                         c10::toString(tensor.scalar_type()) + ")");
    tensor.set_requires_grad(trainable[i]);
    held.emplace_back(parameters[i].first, tensor);
  }
  NamedTensors buffer_list;
  for (const auto& [name, tensor] : buffers) buffer_list.emplace_back(name, tensor.detach());
  return std::make_shared<HostBody>(std::move(held), std::move(buffer_list));
}

}  // namespace accel::train
