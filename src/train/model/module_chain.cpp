#include "train/model/module_chain.hpp"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <unordered_map>

namespace accel::train {

std::vector<std::string> chained_children(const torch::jit::Module& module) {
  const auto method = module.find_method("forward");
  if (!method) return {};
  const std::shared_ptr<torch::jit::Graph> graph = method->graph();
  if (graph->inputs().size() != 2 || graph->outputs().size() != 1) return {};
  const auto is_tensor = [](const torch::jit::Value* value) { return value->type()->kind() == c10::TypeKind::TensorType; };
  const torch::jit::Value* self = graph->inputs()[0];
  const torch::jit::Value* current = graph->inputs()[1];
  if (!is_tensor(current)) return {};
  std::unordered_map<const torch::jit::Value*, std::string> child_of;
  std::vector<std::string> order;
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() == c10::prim::GetAttr && node->input() == self) {
      const std::string name = node->s(c10::attr::name);
      if (!module.hasattr(name) || !module.attr(name).isModule()) return {};
      child_of.emplace(node->output(), name);
      continue;
    }
    const bool calls_forward = node->kind() == c10::prim::CallMethod && node->s(c10::attr::name) == "forward" &&
                               node->inputs().size() == 2 && node->outputs().size() == 1;
    if (!calls_forward || node->inputs()[1] != current || !is_tensor(node->output())) return {};
    const auto child = child_of.find(node->inputs()[0]);
    if (child == child_of.end() || std::find(order.begin(), order.end(), child->second) != order.end()) return {};
    order.push_back(child->second);
    current = node->output();
  }
  if (graph->outputs()[0] != current) return {};
  return order;
}

std::vector<CalledModule> called_modules(torch::jit::Graph& graph) {
  if (graph.inputs().empty()) return {};
  const auto is_tensor = [](const torch::jit::Value* value) { return value->type()->kind() == c10::TypeKind::TensorType; };
  const auto is_module = [](const torch::jit::Value* value) {
    const auto type = value->type()->cast<c10::ClassType>();
    return type && type->is_module();
  };
  const torch::jit::Block* top = graph.block();
  // Every submodule forward reaches (by its path from self), and the calls of each.
  std::unordered_map<const torch::jit::Value*, std::string> path_of;
  std::unordered_map<std::string, int> calls;
  std::vector<const torch::jit::Value*> pending{graph.inputs()[0]};
  while (!pending.empty()) {
    const torch::jit::Value* reached = pending.back();
    pending.pop_back();
    const bool is_self = reached == graph.inputs()[0];
    for (const torch::jit::Use& use : reached->uses()) {
      torch::jit::Node* user = use.user;
      if (user->kind() == c10::prim::GetAttr) {
        if (!is_module(user->output())) {
          if (is_self) continue;  // the root's own parameters, buffers and constants
          return {};              // a submodule's parameter read outside its forward
        }
        if (user->owningBlock() != top) return {};
        const std::string name = user->s(c10::attr::name);
        path_of.emplace(user->output(), is_self ? name : path_of.at(reached) + "." + name);
        pending.push_back(user->output());
        continue;
      }
      const auto inputs = user->inputs();
      const bool calls_forward = !is_self && user->kind() == c10::prim::CallMethod &&
                                 user->s(c10::attr::name) == "forward" && use.offset == 0 && user->owningBlock() == top &&
                                 user->outputs().size() == 1 && is_tensor(user->output()) &&
                                 std::any_of(inputs.begin() + 1, inputs.end(), is_tensor);
      if (!calls_forward || ++calls[path_of.at(reached)] > 1) return {};
    }
  }
  std::vector<CalledModule> called;
  for (torch::jit::Node* node : graph.nodes()) {
    if (node->kind() != c10::prim::CallMethod) continue;
    const auto found = path_of.find(node->inputs()[0]);
    if (found != path_of.end()) called.push_back({node, found->second});
  }
  // A module called with one of its own submodules would hold the submodule's units twice over.
  for (const CalledModule& outer : called) {
    for (const CalledModule& inner : called) {
      if (inner.path.rfind(outer.path + ".", 0) == 0) return {};
    }
  }
  return called;
}

}  // namespace accel::train
