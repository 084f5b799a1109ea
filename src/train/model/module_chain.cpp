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

std::vector<std::string> children_called_once(const torch::jit::Module& module) {
  const auto method = module.find_method("forward");
  if (!method) return {};
  const std::shared_ptr<torch::jit::Graph> graph = method->graph();
  if (graph->inputs().empty()) return {};
  const auto is_tensor = [](const torch::jit::Value* value) { return value->type()->kind() == c10::TypeKind::TensorType; };
  const torch::jit::Block* top = graph->block();
  std::unordered_map<std::string, int> calls;
  for (const torch::jit::Use& use : graph->inputs()[0]->uses()) {
    const torch::jit::Node* reach = use.user;
    if (reach->kind() != c10::prim::GetAttr) return {};
    const std::string name = reach->s(c10::attr::name);
    if (!module.hasattr(name) || !module.attr(name).isModule()) continue;
    if (reach->owningBlock() != top) return {};
    for (const torch::jit::Use& call_use : reach->output()->uses()) {
      const torch::jit::Node* call = call_use.user;
      const bool calls_forward = call->kind() == c10::prim::CallMethod && call->s(c10::attr::name) == "forward" &&
                                 call_use.offset == 0 && call->owningBlock() == top && call->outputs().size() == 1 &&
                                 is_tensor(call->output());
      const auto inputs = call->inputs();
      if (!calls_forward || std::none_of(inputs.begin() + 1, inputs.end(), is_tensor) || ++calls[name] > 1) return {};
    }
  }
  std::vector<std::string> order;
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::prim::CallMethod || node->inputs()[0]->node()->kind() != c10::prim::GetAttr) continue;
    const torch::jit::Node* reach = node->inputs()[0]->node();
    if (reach->input() == graph->inputs()[0] && calls.count(reach->s(c10::attr::name)) != 0) {
      order.push_back(reach->s(c10::attr::name));
    }
  }
  return order;
}

}  // namespace accel::train
