// Whether a TorchScript module's forward is a chain of its top-level children (nn.Sequential's, or any
// forward that only passes one tensor through child after child): then accel can run the children one at a
// time, and ZeRO stage 3 gathers each child's units around its own forward only (train/model/gathered_units).
#pragma once

#include <string>
#include <vector>

namespace torch::jit {
struct Module;
}

namespace accel::train {

// The children's attribute names in the order forward calls them, when forward(self, x) is nothing but
// x = self.<child>(x) for one child after another (a tensor in, a tensor out, every child called once) and
// returns the last output; empty otherwise (also for a module with no forward).
std::vector<std::string> chained_children(const torch::jit::Module& module);

}  // namespace accel::train
