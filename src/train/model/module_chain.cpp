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

}  // namespace accel::train
