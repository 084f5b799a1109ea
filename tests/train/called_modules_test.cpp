// Which submodules a TorchScript forward can be cut around and which it uses otherwise
// (train/model/called_modules.hpp): chains, residual connections, submodules at any depth are cut; a submodule
// called twice, in a branch, with its parameter read outside its forward, or called inside a cut one is held;
// a method of the root's own leaves nothing cut.
#include <gtest/gtest.h>
#include <ATen/ops/ones.h>
#include <torch/csrc/jit/api/module.h>

#include <string>
#include <vector>

#include "train/model/called_modules.hpp"

namespace accel::train {
namespace {

using Names = std::vector<std::string>;

// A root with children a and b (x @ weight), c (relu, times its buffer scale) and outer (whose own child a it
// calls), whose forward is `forward`.
torch::jit::Module root(const std::string& forward) {
  const auto layer = [](const std::string& type) {
    torch::jit::Module module(type);
    module.register_parameter("weight", at::ones({4, 4}), false);
    module.define("def forward(self, x):\n  return torch.matmul(x, self.weight)\n");
    return module;
  };
  torch::jit::Module activation("C");
  activation.register_buffer("scale", at::ones({1}));
  activation.define("def forward(self, x):\n  return torch.relu(x) * self.scale\n");
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

// called_modules' cut paths and held paths for the module's forward.
std::pair<Names, Names> cut_and_held(const torch::jit::Module& module) {
  const CalledModules called = called_modules(*module.get_method("forward").graph());
  Names cut;
  for (const CalledModule& call : called.cut) cut.push_back(call.path);
  return {cut, called.held};
}

TEST(CalledModules, ChainsAndResidualsAreCutAroundEachChild) {
  auto module = root("def forward(self, x):\n  return self.b.forward(self.c.forward(self.a.forward(x)))\n");
  EXPECT_EQ(cut_and_held(module), std::make_pair(Names{"a", "c", "b"}, Names{}));
  module = root("def forward(self, x, y):\n  h = self.a.forward(x)\n  h = h + self.c.forward(h) + y\n"
                "  return self.b.forward(h) * 2\n");
  EXPECT_EQ(cut_and_held(module), std::make_pair(Names{"a", "c", "b"}, Names{}));
}

TEST(CalledModules, SubmodulesAreReachedAtAnyDepth) {
  auto module = root("def forward(self, x):\n  return self.outer.a.forward(self.c.forward(x))\n");
  EXPECT_EQ(cut_and_held(module), std::make_pair(Names{"c", "outer.a"}, Names{}));
  // A module called along with one of its own submodules, which its call needs: the submodule is held.
  module = root("def forward(self, x):\n  return self.outer.forward(self.outer.a.forward(x))\n");
  EXPECT_EQ(cut_and_held(module), std::make_pair(Names{"outer"}, Names{"outer.a"}));
}

TEST(CalledModules, WhatForwardUsesOtherwiseIsHeld) {
  const std::vector<std::pair<std::string, std::pair<Names, Names>>> cases = {
      {"def forward(self, x):\n  return self.b.forward(self.a.forward(self.a.forward(x)))\n", {{"b"}, {"a"}}},
      {"def forward(self, x):\n  if bool(x.sum() > 0):\n    x = self.a.forward(x)\n  return self.b.forward(x)\n",
       {{"b"}, {"a"}}},
      {"def forward(self, x):\n  for i in range(2):\n    x = self.a.forward(x)\n  return self.b.forward(x)\n",
       {{"b"}, {"a"}}},
      {"def forward(self, x):\n  return self.b.forward(x) + torch.matmul(x, self.a.weight)\n", {{"b"}, {"a"}}},
      {"def forward(self, x):\n  return self.outer.forward(x) + torch.matmul(x, self.outer.a.weight)\n",
       {{"outer"}, {"outer.a"}}},
  };
  for (const auto& [forward, expected] : cases) EXPECT_EQ(cut_and_held(root(forward)), expected) << forward;
}

TEST(CalledModules, ASubmodulesBufferReadOutsideItsForwardHoldsNothing) {
  const auto module = root("def forward(self, x):\n  return self.b.forward(self.c.forward(x)) * self.c.scale\n");
  EXPECT_EQ(cut_and_held(module), std::make_pair(Names{"c", "b"}, Names{}));
}

TEST(CalledModules, AMethodOfTheRootsOwnLeavesNothingCut) {
  const auto module = root("def forward(self, x):\n  return self.b.forward(self.helper(x))\n");
  EXPECT_EQ(cut_and_held(module), std::make_pair(Names{}, Names{}));
}

}  // namespace
}  // namespace accel::train
