// Small TorchScript models written from C++ (Module::define), saved to a file for the loaders under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tiny_models {

// forward(x [N, 8]) -> [N, 4]: an MLP 8-16-4 with a ReLU, weights from a fixed seed.
std::string mlp(const std::string& path, int seed = 0);
// forward(x [N, 8]) -> [N, 4]: the MLP 8-16-4 as a chain of top-level children, first (Linear-like),
// act (ReLU, no parameters) and second, each called on the previous one's output (as nn.Sequential's).
std::string chain_mlp(const std::string& path, int seed = 0);
// forward(x [N, 8]) -> [N, 4]: the same children, not chained: h = first(x); h = h + act(h) (a residual
// connection); second(h). Each child called once, one (second) on a tensor that two paths made.
std::string residual_mlp(const std::string& path, int seed = 0);
// forward(x [N, 8]) -> [N, 4]: residual_mlp's, with first and second inside a submodule block that forward
// reaches into (self.block.first), as a scripted nn.ModuleList's items are reached.
std::string nested_mlp(const std::string& path, int seed = 0);
// forward(x [N, 8]) -> [N, 4]: a chain of children first (8-16), mid (16-16), act (ReLU), again (16-16) and
// second (16-4), again's weight the very tensor mid's (tied weights in two children), each its own bias.
std::string tied_children_mlp(const std::string& path, int seed = 0);
// forward(x [N, 8]) -> [N, 4]: first (8-16), second (16-4), act (ReLU), then extra (4-4) called twice, times the
// root's own parameter scale, plus part of sin(x) @ first.weight (a child's parameter read outside its forward).
std::string partly_cut_mlp(const std::string& path, int seed = 0);
// forward(x [N, 8], use [1]) -> [N, 4]: chain_mlp's children, then y + extra(y) (extra 4-4) where use[0] > 0:
// a submodule only some forwards call.
std::string gated_extra_mlp(const std::string& path, int seed = 0);
// forward(x [N, 8]) -> [N, 4]: residual_mlp's, its residual connection in a method of the root's own that
// forward calls (self.middle(h)).
std::string helper_method_mlp(const std::string& path, int seed = 0);
// Like mlp with `hidden` units instead of 16 (sizes that are no multiple of 16 leave kernels' tails).
std::string wide_mlp(const std::string& path, int64_t hidden);
// Like mlp, plus a parameter `unused` that forward never touches.
std::string mlp_with_unused_parameter(const std::string& path);
// forward(x) -> {"logits": [N, 4], "hidden": [N, 16]}, and a second method-less tuple variant.
std::string dict_output(const std::string& path);
std::string tuple_output(const std::string& path);
// forward(x [N, 8]) -> x @ w1 [N, 16]: ends in a matmul, so autocast leaves its output in low precision.
std::string matmul_only(const std::string& path);
// Like mlp, but the archive's storage record data/0 (w1's 512 bytes) is cut to kept_bytes (0: an empty
// record), as in a file truncated or corrupted after it was written; everything else is intact.
std::string mlp_with_truncated_storage(const std::string& path, size_t kept_bytes = 100);
// forward(x [N, 8]) -> [N, 8]: relu(x @ w1 + b1) @ head.w.t() * head.scale, with head.w the very tensor
// w1 (tied weights, as an embedding and its output layer) unless `tied` is false, when head.w is a copy
// of w1's values (`head_offset` added to them). Buffers: head.scale (float [1]) and steps (int64 [2]).
std::string tied(const std::string& path, int seed = 0, bool tied = true, float head_offset = 0.0f);
// Like mlp, but forward takes one of two branches by the sign of a sum it computes: data-dependent control
// flow, which reads a value back from the device (no CUDA graph can capture it).
std::string branching(const std::string& path);
// Like mlp, plus a buffer `running_mean` (float [8]) that each forward in training mode moves, as
// BatchNorm moves its running statistics: running_mean = 0.9 running_mean + 0.1 mean of x over the batch.
std::string mlp_with_running_mean(const std::string& path);
// A file in the test's temporary directory, unique to this process.
std::string temp_file(const std::string& name);

}  // namespace tiny_models
