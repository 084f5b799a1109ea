// The settings of the process state (Accelerate's Accelerator arguments): the only ones that ACCEL_*
// environment variables set. Free of LibTorch, so that the CLI can show them.
#pragma once

#include <string>
#include <vector>

#include "core/options.hpp"

namespace accel::distributed {

const OptionScope& state_option_scope();

// The state settings each accel_state_t handle has for itself (the project: Accelerate's
// ProjectConfiguration belongs to the Accelerator), which two handles of one process may set differently.
const std::vector<std::string>& per_handle_options();

// ACCEL_* variables that are not option settings: read by accel's launcher or bindings, or set by the
// launcher for the program (ACCEL_RESTART_COUNT).
const std::vector<std::string>& non_option_variables();

}  // namespace accel::distributed
