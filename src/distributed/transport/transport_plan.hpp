// How the all-reduces of CPU tensors will travel, as far as the launch environment and the settings tell
// before the rendezvous: what the state asks of the process group, and what `accel env` says. Free of
// LibTorch, so that the CLI can show it.
#pragma once

#include <string>

#include "core/env.hpp"

namespace accel::distributed {

struct TransportPlan {
  bool shared_memory = false;  // ask the process group for shared memory (GroupConfig::shared_memory)
  bool required = false;       // intra_node_transport 'shm': an error where the segment cannot be made
  std::string name;            // what accel_state_backend says once the group is up and shared memory worked
  std::string reason;          // why, in words
};

// `backend`: the c10d backend the state chose ("gloo" or "nccl"); `cuda`: whether its device is a GPU.
// Throws Error(Unsupported) where intra_node_transport 'shm' cannot serve (NCCL, one rank per node).
TransportPlan plan_transport(const LaunchInfo& launch, const std::string& backend, const std::string& transport,
                             bool cuda);

}  // namespace accel::distributed
