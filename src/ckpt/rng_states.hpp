// The random generators of this process that a checkpoint saves per rank: torch's default CPU generator,
// and each CUDA device's when built with CUDA. Each state is a uint8 tensor named "cpu" or "cuda:<i>".
#pragma once

#include "core/named_tensors.hpp"

namespace accel::ckpt {

NamedTensors capture_rng_states();
// Error(InvalidArgument) naming `path` when a generator this process has is missing from `states`; used
// before anything is restored, so that a bad file changes nothing.
void check_rng_states(const NamedTensors& states, const std::string& path);
// Sets every generator from `states` (checked first with check_rng_states).
void restore_rng_states(const NamedTensors& states);

}  // namespace accel::ckpt
