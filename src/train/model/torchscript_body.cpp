#include <torch/csrc/jit/api/module.h>

#include "core/error.hpp"
#include "train/model/cut_forward.hpp"
#include "train/model/model_body.hpp"
#include "train/torchscript/torchscript_file.hpp"

namespace accel::train {
namespace {

template <typename List>
NamedTensors slots_of(const List& list) {
  NamedTensors slots;
  for (const auto& item : list) slots.emplace_back(item.name, item.value);
  return slots;
}

class TorchScriptBody final : public ModelBody {
 public:
  explicit TorchScriptBody(torch::jit::Module module) : module_(std::move(module)) {}

  NamedTensors parameter_slots() const override { return slots_of(module_.named_parameters(true)); }
  NamedTensors buffer_slots() const override { return slots_of(module_.named_buffers(true)); }
  void to(const c10::Device& device, bool trainable_too) override {
    if (trainable_too) {
      module_.to(device);
      return;
    }
    // As Module::to moves each tensor: its data replaced, the tensor kept.
    for (at::Tensor parameter : module_.parameters(/*recurse=*/true)) {
      if (!parameter.requires_grad()) parameter.set_data(parameter.to(device));
    }
    for (at::Tensor buffer : module_.buffers(/*recurse=*/true)) buffer.set_data(buffer.to(device));
  }

  c10::IValue forward(std::vector<c10::IValue> inputs, const std::unordered_map<std::string, c10::IValue>& named) override {
    try {
      return module_.forward(std::move(inputs), named);
    } catch (const std::exception& error) {
      // TorchScript's interpreter reports a failing model line as a plain runtime error, LibTorch's own
      // checks as c10::Error.
      fail_from(error, Code::Torch, "forward failed: ");
    }
  }

  CutChildren cut_children() override {
    const CutForward* cut = cut_forward();
    return cut ? CutChildren{cut->children(), cut->held()} : CutChildren{};
  }

  c10::IValue forward_around(std::vector<c10::IValue> inputs, const std::unordered_map<std::string, c10::IValue>& named,
                             const std::function<void(size_t)>& before,
                             const std::function<void(size_t, const at::Tensor&)>& after) override {
    CutForward* cut = cut_forward();
    if (cut == nullptr) fail(Code::Internal, "forward_around: this model's forward cannot be cut");
    try {
      return cut->run(module_, std::move(inputs), named, before, after);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& error) {
      fail_from(error, Code::Torch, "forward failed: ");
    }
  }

  void train(bool on) override { module_.train(on); }
  bool is_training() const override { return module_.is_training(); }

  void save_torchscript(const std::string& path) const override {
    try {
      module_.save(path);
    } catch (const std::exception& error) {
      fail_from(error, Code::Io, "cannot save the model to '" + path + "': ");
    }
  }

  bool host_owned() const override { return false; }

 private:
  // The forward's cut copy, made on the first call (nullptr: it cannot be cut, which CutForward::make says by
  // finding no submodule to cut around).
  CutForward* cut_forward() {
    if (!cut_analysed_) {
      cut_ = CutForward::make(module_);
      cut_analysed_ = true;
    }
    return cut_.get();
  }

  torch::jit::Module module_;
  std::unique_ptr<CutForward> cut_;
  bool cut_analysed_ = false;
};

}  // namespace

c10::IValue ModelBody::forward_around(std::vector<c10::IValue>, const std::unordered_map<std::string, c10::IValue>&,
                                      const std::function<void(size_t)>&,
                                      const std::function<void(size_t, const at::Tensor&)>&) {
  fail(Code::Unsupported, "forward_around: this model has no children accel runs");
}

std::shared_ptr<ModelBody> torchscript_body(std::istream& archive, const std::string& source) {
  return std::make_shared<TorchScriptBody>(load_torchscript(archive, source));
}

}  // namespace accel::train
