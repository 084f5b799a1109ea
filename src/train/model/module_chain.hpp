// Which submodules a TorchScript module's forward calls, and how: when it is a chain of its top-level children
// (nn.Sequential's, or any forward that only passes one tensor through child after child) accel runs the
// children one at a time; when it calls submodules (at any depth) each once, in its own block, accel runs a copy
// of forward with its calls around each of theirs (train/model/cut_forward.hpp). Either way ZeRO stage 3
// gathers each submodule's units around its own forward only (train/model/gathered_units).
#pragma once

#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
struct Module;
struct Node;
}

namespace accel::train {

// The children's attribute names in the order forward calls them, when forward(self, x) is nothing but
// x = self.<child>(x) for one child after another (a tensor in, a tensor out, every child called once) and
// returns the last output; empty otherwise (also for a module with no forward).
std::vector<std::string> chained_children(const torch::jit::Module& module);

// A submodule forward calls: the call, and the submodule's path from the root ("block.first", as its
// parameters' names begin).
struct CalledModule {
  torch::jit::Node* call;
  std::string path;
};

// The submodules a forward graph calls, in the order it calls them, when it reaches submodules (at any depth,
// nn.ModuleList's items as TorchScript unrolls them) only to call their forward, each once, in its own block
// (not in a branch or a loop), with a tensor among the inputs and one tensor out, never one inside another
// it calls, and uses self only to reach attributes (no method of its own, no submodule's parameter read
// outside its forward); empty otherwise. Residual connections and several inputs are fine.
std::vector<CalledModule> called_modules(torch::jit::Graph& graph);

}  // namespace accel::train
