// Which submodules a TorchScript module's forward calls, and how (read from its graph's prim::GetAttr and
// prim::CallMethod nodes): those it calls in a way accel can cut around (train/model/cut_forward.hpp), so that
// ZeRO stage 3 gathers their units around their own forward only, and those it uses otherwise, whose
// parameters stay gathered through the whole forward and its backward (train/model/gathered_units.hpp), as
// FSDP holds the root unit's.
#pragma once

#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
struct Node;
}

namespace accel::train {

// A submodule forward calls: the call, and the submodule's path from the root ("block.first", as its
// parameters' names begin).
struct CalledModule {
  torch::jit::Node* call;
  std::string path;
};

// cut: the submodules a forward graph calls that can be cut around, in the order it calls them: reached
// (at any depth, nn.ModuleList's items as TorchScript unrolls them) only to call their forward, once, in
// forward's own block (not in a branch or a loop), with a tensor among the inputs and one tensor out, none
// inside another of them, none inside a held one. Residual connections and several inputs are fine.
// held: the paths of the submodules forward uses otherwise (called twice, in a branch or a loop, with
// other inputs or outputs, a method other than forward, a parameter read outside their forward, called
// along with a cut module that holds them); their parameters at any depth are to be held. Reading a
// submodule's buffers or constants holds nothing (they are never sharded).
// Both empty when forward uses self other than to reach attributes (a method of its own, self passed on):
// what that reads cannot be seen, and nothing is cut (cut_forward.hpp inlines the root's methods first).
struct CalledModules {
  std::vector<CalledModule> cut;
  std::vector<std::string> held;
};
CalledModules called_modules(torch::jit::Graph& graph);

// Whether `name` (a submodule's path, or a parameter's name) is the submodule at `path` or lies inside it.
bool within_module(const std::string& name, const std::string& path);

}  // namespace accel::train
