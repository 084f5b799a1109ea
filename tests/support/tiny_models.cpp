#include "tiny_models.hpp"

#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>

#include "temp_dir.hpp"

namespace tiny_models {

namespace {

// Parameters saved from C++ keep their requires_grad flag, so it is set as nn.Parameter would.
at::Tensor parameter(at::Tensor value) { return value.set_requires_grad(true); }

torch::jit::Module mlp_module(int seed, int64_t hidden = 16) {
  torch::manual_seed(seed);
  torch::jit::Module module("Mlp");
  module.register_parameter("w1", parameter(torch::randn({8, hidden}) * 0.3), false);
  module.register_parameter("b1", parameter(torch::randn({hidden}) * 0.1), false);
  module.register_parameter("w2", parameter(torch::randn({hidden, 4}) * 0.3), false);
  module.register_parameter("b2", parameter(torch::randn({4}) * 0.1), false);
  return module;
}

// module with `source` (its forward, and any other method) defined, saved to path; returns path.
std::string saved(torch::jit::Module module, const std::string& source, const std::string& path) {
  module.define(source);
  module.save(path);
  return path;
}

constexpr const char* kHidden = "torch.relu(torch.matmul(x, self.w1) + self.b1)";

std::string saved_mlp(torch::jit::Module module, const std::string& path) {
  return saved(module,
               std::string("def forward(self, x):\n  h = ") + kHidden +
               "\n  return torch.matmul(h, self.w2) + self.b2\n",
               path);
}

}  // namespace

std::string mlp(const std::string& path, int seed) { return saved_mlp(mlp_module(seed), path); }

namespace {

// A Linear-like module: x @ weight + bias.
torch::jit::Module layer(const std::string& type, int64_t in, int64_t out) {
  torch::jit::Module module(type);
  module.register_parameter("weight", parameter(torch::randn({in, out}) * 0.3), false);
  module.register_parameter("bias", parameter(torch::randn({out}) * 0.1), false);
  module.define("def forward(self, x):\n  return torch.matmul(x, self.weight) + self.bias\n");
  return module;
}

// A module without parameters: relu(x).
torch::jit::Module activation() {
  torch::jit::Module module("Activation");
  module.define("def forward(self, x):\n  return torch.relu(x)\n");
  return module;
}

// A root of type `type` holding first (8-16), act and second (16-4) (chain_mlp's), weights from `seed`.
torch::jit::Module children_module(const std::string& type, int seed) {
  torch::manual_seed(seed);
  torch::jit::Module module(type);
  module.register_module("first", layer("First", 8, 16));
  module.register_module("act", activation());
  module.register_module("second", layer("Second", 16, 4));
  return module;
}

// children_module's, whose forward is `forward`.
std::string children_mlp(const std::string& path, int seed, const std::string& forward) {
  torch::jit::Module module = children_module("Chain", seed);
  return saved(module, forward, path);
}

}  // namespace

std::string chain_mlp(const std::string& path, int seed) {
  return children_mlp(path, seed,
                      "def forward(self, x):\n  x = self.first.forward(x)\n  x = self.act.forward(x)\n"
                      "  return self.second.forward(x)\n");
}

std::string nested_mlp(const std::string& path, int seed) {
  torch::manual_seed(seed);
  torch::jit::Module block("Block");
  block.register_module("first", layer("First", 8, 16));
  block.register_module("second", layer("Second", 16, 4));
  torch::jit::Module module("Nested");
  module.register_module("block", block);
  module.register_module("act", activation());
  return saved(module,
               "def forward(self, x):\n  h = self.block.first.forward(x)\n  h = h + self.act.forward(h)\n"
               "  return self.block.second.forward(h)\n",
               path);
}

std::string residual_mlp(const std::string& path, int seed) {
  return children_mlp(path, seed,
                      "def forward(self, x):\n  h = self.first.forward(x)\n  h = h + self.act.forward(h)\n"
                      "  return self.second.forward(h)\n");
}

std::string tied_children_mlp(const std::string& path, int seed) {
  torch::manual_seed(seed);
  torch::jit::Module mid = layer("Mid", 16, 16);
  torch::jit::Module again = layer("Again", 16, 16);
  again.register_parameter("weight", mid.attr("weight").toTensor(), false);
  torch::jit::Module module("TiedChildren");
  module.register_module("first", layer("First", 8, 16));
  module.register_module("mid", mid);
  module.register_module("act", activation());
  module.register_module("again", again);
  module.register_module("second", layer("Second", 16, 4));
  return saved(module,
               "def forward(self, x):\n  x = self.first.forward(x)\n  x = self.mid.forward(x)\n"
               "  x = self.act.forward(x)\n  x = self.again.forward(x)\n  return self.second.forward(x)\n",
               path);
}

std::string partly_cut_mlp(const std::string& path, int seed) {
  torch::jit::Module module = children_module("PartlyCut", seed);
  module.register_module("extra", layer("Extra", 4, 4));
  module.register_parameter("scale", parameter(torch::rand({4}) + 0.5), false);
  return saved(module,
               "def forward(self, x):\n  h = self.first.forward(x)\n  y = self.act.forward(self.second.forward(h))\n"
               "  y = self.extra.forward(self.extra.forward(y))\n"
               "  return y * self.scale + torch.narrow(torch.matmul(torch.sin(x), self.first.weight), 1, 0, 4)\n",
               path);
}

std::string gated_extra_mlp(const std::string& path, int seed) {
  torch::jit::Module module = children_module("GatedExtra", seed);
  module.register_module("extra", layer("Extra", 4, 4));
  return saved(module,
               "def forward(self, x, use):\n  y = self.second.forward(self.act.forward(self.first.forward(x)))\n"
               "  if bool(use[0] > 0):\n    y = y + self.extra.forward(y)\n  return y\n",
               path);
}

std::string helper_method_mlp(const std::string& path, int seed) {
  torch::jit::Module module = children_module("HelperMethod", seed);
  return saved(module,
               "def middle(self, h):\n  return h + self.act.forward(h)\n"
               "def forward(self, x):\n  h = self.first.forward(x)\n  return self.second.forward(self.middle(h))\n",
               path);
}

std::string wide_mlp(const std::string& path, int64_t hidden) { return saved_mlp(mlp_module(0, hidden), path); }

std::string mlp_with_unused_parameter(const std::string& path) {
  auto module = mlp_module(0);
  module.register_parameter("unused", parameter(torch::ones({3})), false);
  return saved_mlp(module, path);
}

std::string mlp_with_running_mean(const std::string& path) {
  auto module = mlp_module(0);
  module.register_buffer("running_mean", torch::zeros({8}));
  module.register_attribute("training", c10::BoolType::get(), true);  // what nn.Module has and train() sets
  return saved(module,
               std::string("def forward(self, x):\n"
                           "  if self.training:\n"
                           "    self.running_mean.mul_(0.9).add_(x.detach().mean(0) * 0.1)\n"
                           "  h = ") +
               kHidden + "\n  return torch.matmul(h, self.w2) + self.b2\n",
               path);
}

std::string dict_output(const std::string& path) {
  auto module = mlp_module(0);
  return saved(module,
               std::string("def forward(self, x):\n  h = ") + kHidden +
               "\n  return {'logits': torch.matmul(h, self.w2) + self.b2, 'hidden': h}\n",
               path);
}

std::string tuple_output(const std::string& path) {
  auto module = mlp_module(0);
  return saved(module,
               std::string("def forward(self, x):\n  h = ") + kHidden +
               "\n  return (torch.matmul(h, self.w2) + self.b2, h)\n",
               path);
}

std::string matmul_only(const std::string& path) {
  auto module = mlp_module(0);
  return saved(module, "def forward(self, x):\n  return torch.matmul(x, self.w1)\n", path);
}

std::string tied(const std::string& path, int seed, bool tied, float head_offset) {
  torch::manual_seed(seed);
  const at::Tensor w1 = parameter(torch::randn({8, 16}) * 0.3);
  torch::jit::Module head("Head");
  head.register_parameter("w", tied ? w1 : parameter(w1.detach() + head_offset), false);
  head.register_buffer("scale", torch::full({1}, 0.5));
  torch::jit::Module module("Tied");
  module.register_parameter("w1", w1, false);
  module.register_parameter("b1", parameter(torch::randn({16}) * 0.1), false);
  module.register_module("head", head);
  module.register_buffer("steps", torch::tensor({seed, 7}, torch::kLong));
  return saved(module,
               std::string("def forward(self, x):\n  h = ") + kHidden +
               "\n  return torch.matmul(h, self.head.w.t()) * self.head.scale\n",
               path);
}

std::string branching(const std::string& path) {
  auto module = mlp_module(0);
  return saved(module,
               std::string("def forward(self, x):\n  h = ") + kHidden +
               "\n  if bool(h.sum() > 0.0):\n    return torch.matmul(h, self.w2) + self.b2\n"
               "  return torch.matmul(h, self.w2) - self.b2\n",
               path);
}

std::string mlp_with_truncated_storage(const std::string& path, size_t kept_bytes) {
  const std::string whole = mlp(path + ".whole");
  {
    caffe2::serialize::PyTorchStreamReader reader(whole);
    caffe2::serialize::PyTorchStreamWriter writer(path);
    writer.setMinVersion(reader.version());
    for (const auto& name : reader.getAllRecords()) {
      if (name == "version" || name == ".data/version") continue;  // the writer adds its own
      auto [data, size] = reader.getRecord(name);
      writer.writeRecord(name, data.get(), name == "data/0" ? kept_bytes : size);
    }
    writer.writeEndOfFile();
  }
  std::remove(whole.c_str());
  return path;
}

std::string temp_file(const std::string& name) {
  return test_support::temp_directory() + "/accel_test_" + std::to_string(getpid()) + "_" + name;
}

}  // namespace tiny_models
