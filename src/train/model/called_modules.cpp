#include "train/model/called_modules.hpp"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace accel::train {
namespace {

bool is_tensor(const torch::jit::Value* value) { return value->type()->kind() == c10::TypeKind::TensorType; }

c10::ClassTypePtr module_type(const torch::jit::Value* value) {
  const auto type = value->type()->cast<c10::ClassType>();
  return type && type->is_module() ? type : nullptr;
}

// A call of a submodule's forward accel can surround with its own: in forward's own block, a tensor among the
// inputs (what enter_child passes through) and one tensor out (what leave_child does).
bool cuttable_call(const torch::jit::Use& use, const torch::jit::Block* top) {
  const torch::jit::Node* user = use.user;
  const auto inputs = user->inputs();
  return user->kind() == c10::prim::CallMethod && user->s(c10::attr::name) == "forward" && use.offset == 0 &&
         user->owningBlock() == top && user->outputs().size() == 1 && is_tensor(user->output()) &&
         std::any_of(inputs.begin() + 1, inputs.end(), is_tensor);
}

}  // namespace

bool within_module(const std::string& name, const std::string& path) {
  return name == path ||
         (name.size() > path.size() && name.compare(0, path.size(), path) == 0 && name[path.size()] == '.');
}

CalledModules called_modules(torch::jit::Graph& graph) {
  if (graph.inputs().empty()) return {};
  const torch::jit::Value* self = graph.inputs()[0];
  const torch::jit::Block* top = graph.block();
  std::unordered_map<const torch::jit::Value*, std::string> path_of;
  std::map<std::string, std::vector<torch::jit::Node*>> calls;  // each submodule's cuttable calls
  std::set<std::string> held;
  std::vector<const torch::jit::Value*> pending{self};
  while (!pending.empty()) {
    const torch::jit::Value* reached = pending.back();
    pending.pop_back();
    const bool is_self = reached == self;
    const std::string path = is_self ? std::string() : path_of.at(reached);
    const c10::ClassTypePtr type = module_type(reached);
    for (const torch::jit::Use& use : reached->uses()) {
      torch::jit::Node* user = use.user;
      if (user->kind() == c10::prim::GetAttr) {
        const std::string name = user->s(c10::attr::name);
        if (!module_type(user->output())) {
          // The root's own parameters are held anyway; a submodule's parameter read outside its forward holds it.
          const auto slot = type->findAttributeSlot(name);
          if (!is_self && slot && type->is_parameter(*slot)) held.insert(path);
          continue;
        }
        const std::string child = is_self ? name : path + "." + name;
        if (user->owningBlock() != top) {
          held.insert(child);  // reached inside a branch or a loop
          continue;
        }
        path_of.emplace(user->output(), child);
        pending.push_back(user->output());
        continue;
      }
      if (user->kind() == c10::prim::SetAttr && use.offset == 0) {
        // A buffer's new value (BatchNorm's running statistics); a parameter replaced would escape its unit.
        const auto slot = type->findAttributeSlot(user->s(c10::attr::name));
        if (!slot || !type->is_parameter(*slot)) continue;
        if (is_self) return {};
        held.insert(path);
        continue;
      }
      if (is_self) return {};  // a method of the root's own, or self passed on
      if (cuttable_call(use, top)) {
        calls[path].push_back(user);
      } else {
        held.insert(path);
      }
    }
  }
  const auto is_held = [&](const std::string& path) {
    return std::any_of(held.begin(), held.end(), [&](const std::string& h) { return within_module(path, h); });
  };
  std::vector<std::string> candidates;
  for (const auto& [path, nodes] : calls) {
    if (nodes.size() > 1) held.insert(path);
  }
  for (const auto& [path, nodes] : calls) {
    if (!is_held(path)) candidates.push_back(path);
  }
  // A module called with one of its own submodules, which its call would need gathered: the submodule held.
  for (const std::string& inner : candidates) {
    for (const std::string& outer : candidates) {
      if (inner != outer && within_module(inner, outer)) held.insert(inner);
    }
  }
  CalledModules result;
  for (torch::jit::Node* node : graph.nodes()) {
    if (node->kind() != c10::prim::CallMethod) continue;
    const auto found = path_of.find(node->inputs()[0]);
    if (found != path_of.end() && calls.count(found->second) != 0 && !is_held(found->second)) {
      result.cut.push_back({node, found->second});
    }
  }
  result.held.assign(held.begin(), held.end());
  return result;
}

}  // namespace accel::train
