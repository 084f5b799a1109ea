// A TorchScript forward run with accel's calls around each submodule's forward that it can be cut around
// (called_modules.hpp: a chain of children, residual connections, several inputs, submodules at any depth as
// nn.ModuleList's items). A copy of forward's graph gets two operators of accel's around each such call,
// identities on the call's first tensor input and on its output that call back into accel (ZeRO stage 3
// gathers the child's units before its forward and frees them after it, hooking its output for the
// backward); the copy runs as a function of its own with the module as self, so the module, its saved file
// and its other methods stay as they were. The operators alias anything as far as TorchScript's optimiser
// knows, so that nothing that reads a child's parameters moves across them.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace torch::jit {
struct Module;
}

namespace accel::train {

class CutForward {
 public:
  // nullptr when forward cannot be cut (called_modules of its graph cuts nothing).
  static std::unique_ptr<CutForward> make(const torch::jit::Module& module);
  ~CutForward();
  CutForward(const CutForward&) = delete;
  CutForward& operator=(const CutForward&) = delete;

  // The submodules cut around, by path ("layers.0"), in the order forward calls them, and the submodules
  // whose parameters forward uses otherwise (called_modules' cut and held).
  const std::vector<std::string>& children() const { return children_; }
  const std::vector<std::string>& held() const { return held_; }
  // module's forward on `inputs` (positional, then `named`), with before(k) just before children()[k]'s forward and after(k,
  // its output) just after it. An accel::Error thrown by either comes out as itself; TorchScript's own errors as
  // the interpreter throws them. Not reentrant: one run at a time per object.
  c10::IValue run(const torch::jit::Module& module, std::vector<c10::IValue> inputs,
                  const std::unordered_map<std::string, c10::IValue>& named,
                  const std::function<void(size_t)>& before,
                  const std::function<void(size_t, const at::Tensor&)>& after);

 private:
  struct Impl;
  CutForward(std::vector<std::string> children, std::vector<std::string> held, std::unique_ptr<Impl> impl);
  std::vector<std::string> children_;
  std::vector<std::string> held_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::train
