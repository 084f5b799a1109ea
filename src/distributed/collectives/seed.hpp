// Accelerate's set_seed for what accel has of what it seeds: torch's default CPU generator and every
// CUDA device's default generator (torch.manual_seed). Python's random and numpy have no counterpart here.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>

#include "distributed/state.hpp"

namespace accel::distributed {

// Seeds the generators with seed, or with seed + this rank's index when device_specific, so that each
// process draws other numbers. Local to the process (not collective). Loaders shuffle with their own
// generator (data_seed); only a seedable one made afterwards without data_seed reads the seed.
void set_seed(const State& state, uint64_t seed, bool device_specific);

// Gives generator rank 0's state on every rank (Accelerate's synchronize_rng_state). Collective; call with
// the generator's lock held.
void synchronize_generator(State& state, at::Generator& generator);

// Accelerate's synchronize_rng_states for the state setting rng_types' "torch" (torch's default CPU
// generator) and "cuda" (the default generator of the state's CUDA device; nothing on the CPU). Collective.
void synchronize_rng_states(State& state, bool torch_generator, bool cuda_generator);

}  // namespace accel::distributed
