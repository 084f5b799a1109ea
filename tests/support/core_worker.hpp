// Shared by the multi-process workers that test the C++ core directly (gradients and other internals the
// C ABI does not hand out): every rank runs the same tests against one state made by core_worker_main.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "distributed/state.hpp"
#include "train/model/model.hpp"

namespace core_worker {

extern std::shared_ptr<accel::distributed::State> state;

inline int64_t rank() { return state->launch().rank; }
inline int64_t world() { return state->launch().world_size; }

// tiny_models' MLP, written to a file named after tag and loaded.
std::shared_ptr<accel::train::Model> load_mlp(const std::string& tag);

}  // namespace core_worker
