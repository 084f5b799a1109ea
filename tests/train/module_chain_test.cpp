// Which children a TorchScript forward calls, and whether accel can cut it between them
// (train/model/module_chain.hpp): a chain, a forward that calls each child once in its own block, and the
// forwards that cannot be cut (a child called twice or in a branch, a child's parameter read directly, a
// method of the root's own).
#include <gtest/gtest.h>
#include <ATen/ops/ones.h>
#include <torch/csrc/jit/api/module.h>

#include <string>
#include <vector>

#include "train/model/module_chain.hpp"

namespace accel::train {
namespace {

using Names = std::vector<std::string>;

// A root with children a and b (x @ weight), c (relu) and outer (whose own child a it calls), whose forward is
// `forward`.
torch::jit::Module root(const std::string& forward) {
  const auto layer = [](const std::string& type) {
    torch::jit::Module module(type);
    module.register_parameter("weight", at::ones({4, 4}), false);
    module.define("def forward(self, x):\n  return torch.matmul(x, self.weight)\n");
    return module;
  };
  torch::jit::Module activation("C");
  activation.define("def forward(self, x):\n  return torch.relu(x)\n");
  torch::jit::Module module("Root");
  module.register_module("a", layer("A"));
  module.register_module("b", layer("B"));
  module.register_module("c", activation);
  torch::jit::Module outer("Outer");
  outer.register_module("a", layer("OuterA"));
  outer.define("def forward(self, x):\n  return self.a.forward(x)\n");
  module.register_module("outer", outer);
  module.define("def helper(self, x):\n  return self.a.forward(x)\n");
  module.define(forward);
  return module;
}

// called_modules' paths for the module's forward.
Names called_paths(const torch::jit::Module& module) {
  Names paths;
  for (const CalledModule& call : called_modules(*module.get_method("forward").graph())) paths.push_back(call.path);
  return paths;
}

TEST(ModuleChain, AChainIsBothAChainAndCalledOnce) {
  const auto module = root("def forward(self, x):\n  return self.b.forward(self.c.forward(self.a.forward(x)))\n");
  EXPECT_EQ(chained_children(module), (Names{"a", "c", "b"}));
  EXPECT_EQ(called_paths(module), (Names{"a", "c", "b"}));
}

TEST(ModuleChain, ResidualsAndSeveralInputsAreCalledOnce) {
  const auto module = root("def forward(self, x, y):\n  h = self.a.forward(x)\n  h = h + self.c.forward(h) + y\n"
                           "  return self.b.forward(h) * 2\n");
  EXPECT_EQ(chained_children(module), Names{});
  EXPECT_EQ(called_paths(module), (Names{"a", "c", "b"}));
}

TEST(ModuleChain, SubmodulesAreReachedAtAnyDepth) {
  torch::jit::Module module = root("def forward(self, x):\n  return self.outer.a.forward(self.c.forward(x))\n");
  EXPECT_EQ(called_paths(module), (Names{"c", "outer.a"}));
  // A module called with one of its own submodules: refused.
  module = root("def forward(self, x):\n  return self.outer.forward(self.outer.a.forward(x))\n");
  EXPECT_EQ(called_paths(module), Names{});
}

TEST(ModuleChain, WhatCannotBeCut) {
  for (const std::string forward : {
           "def forward(self, x):\n  return self.a.forward(self.a.forward(x))\n",
           "def forward(self, x):\n  if bool(x.sum() > 0):\n    x = self.a.forward(x)\n  return self.b.forward(x)\n",
           "def forward(self, x):\n  return self.b.forward(x) + torch.matmul(x, self.a.weight)\n",
           "def forward(self, x):\n  return self.b.forward(self.helper(x))\n",
       }) {
    EXPECT_EQ(called_paths(root(forward)), Names{}) << forward;
  }
}

}  // namespace
}  // namespace accel::train
