// What a model is before prepare wraps it for data parallelism (train/model/model.hpp): its tensors under every
// name that holds them and, when accel runs it, a forward. Either a TorchScript module that libaccel runs,
// or tensors that live in the caller's runtime (an eager PyTorch nn.Module, a LibTorch C++ module, arrays
// of Rust or Julia), whose forward and backward the caller runs.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <functional>
#include <istream>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/named_tensors.hpp"

namespace accel::train {

class ModelBody {
 public:
  virtual ~ModelBody() = default;

  // Every slot's name and tensor, in registration order: a tensor that several modules hold (tied weights)
  // appears once per holder, as the same TensorImpl.
  virtual NamedTensors parameter_slots() const = 0;
  virtual NamedTensors buffer_slots() const = 0;
  // Puts every tensor on device, keeping each TensorImpl (so slots listed before stay the tensors); without
  // trainable_too, the trainable parameters (requires_grad) stay where they are (zero_stage 3 takes their
  // values a unit at a time).
  virtual void to(const c10::Device& device, bool trainable_too) = 0;
  // forward; Error(Unsupported) for a model whose forward runs in the caller's runtime.
  virtual c10::IValue forward(std::vector<c10::IValue> inputs, const std::unordered_map<std::string, c10::IValue>& named) = 0;
  // The submodules forward can be cut around (train/model/called_modules.hpp), by path ("layers.0"), in the
  // order it calls them, and those whose parameters (at any depth) it uses otherwise, which stay gathered;
  // cut empty when forward cannot be cut, or runs in the caller's runtime.
  struct CutChildren {
    std::vector<std::string> cut;
    std::vector<std::string> held;
  };
  virtual CutChildren cut_children() { return {}; }
  // forward, with before(k) just before cut_children().cut[k]'s forward and after(k, its
  // output) just after it; an accel::Error either throws comes out as itself.
  virtual c10::IValue forward_around(std::vector<c10::IValue> inputs, const std::unordered_map<std::string, c10::IValue>& named,
                                     const std::function<void(size_t)>& before,
                                     const std::function<void(size_t, const at::Tensor&)>& after);
  virtual void train(bool on) = 0;
  virtual bool is_training() const = 0;
  // Error(Unsupported) for a model that is not TorchScript; Error(Io) when the file cannot be written.
  virtual void save_torchscript(const std::string& path) const = 0;
  // Whether forward and backward run in the caller's runtime.
  virtual bool host_owned() const = 0;
};

// A TorchScript archive (torch.jit.save), loaded on the CPU. Errors: those of load_torchscript.
std::shared_ptr<ModelBody> torchscript_body(std::istream& archive, const std::string& source);

// The caller's tensors, shared, never copied: parameters (those with trainable[i] false are frozen, as a
// parameter with requires_grad False) and buffers, each a name and a tensor. Names must be unique and
// tensors defined and dense; a tensor given under several names is one tensor held twice (tied weights).
// Errors: Error(InvalidArgument) naming the problem.
std::shared_ptr<ModelBody> eager_module_body(const NamedTensors& parameters, const std::vector<bool>& trainable,
                                     const NamedTensors& buffers);

}  // namespace accel::train
