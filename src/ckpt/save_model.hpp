// Accelerate's save_model: the unwrapped model's weights as DIR/model.safetensors, written by the main
// process while the others wait.
#pragma once

#include <string>

#include "distributed/state.hpp"
#include "train/model.hpp"

namespace accel::ckpt {

// Collective. Creates `directory` (and its parents) when missing. Throws Error(Io) naming the path.
void save_model(distributed::State& state, const train::Model& model, const std::string& directory);

}  // namespace accel::ckpt
