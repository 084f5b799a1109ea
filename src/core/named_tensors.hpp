// Tensors with names, in order: a batch's fields, a model's parameters, forward's keyword arguments,
// the contents of a .safetensors file. One type for all of them, so they pass between areas unconverted.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace accel {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace accel
