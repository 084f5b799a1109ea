// Writes named tensors as a .safetensors file, atomically: a reader sees the old file or the new one,
// never a partial write (the bytes go to a temporary file in the same directory, then rename).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace accel::ckpt {

// Tensors are written in name order, as contiguous CPU copies, with {"format": "pt"} and `metadata` in
// __metadata__. Throws Error(Io) naming the path on any failure (the old file, if any, is untouched);
// Error(Dtype) for a dtype safetensors cannot hold; Error(InvalidArgument) for a repeated name.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace accel::ckpt
