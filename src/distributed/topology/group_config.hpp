// What a process group is made of: this rank's place in the job, where the rendezvous is, and which
// transports carry the collectives (process_group.hpp). Its own header so that the group's parts
// (group_health.hpp, the transports) can read it without depending on the group itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace accel::distributed {

struct GroupConfig {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  // What a process presents to rank 0's store to be served (LaunchInfo::job_key).
  std::string job_key;
  std::chrono::milliseconds timeout{1800 * 1000};
  std::string backend = "gloo";  // "gloo" or "nccl"
  // All-reduces of CPU tensors go through shared memory within each node instead of the backend; with
  // several nodes, between them through one Gloo group of the nodes' leaders (node_layout.hpp).
  bool shared_memory = false;
  // The launcher's node index (LaunchInfo::group_rank), part of what tells nodes apart.
  int32_t group_rank = -1;
  // Shared memory that cannot be set up is then an error; otherwise Gloo does the work, said once.
  bool shared_memory_required = false;
  // A subgroup of the job's ranks (ProcessGroup::split_by_node): what it is, for its errors ("the ranks of
  // node 1"), and the job's rank of each of its ranks, in its rank order. Empty for the job's own group.
  std::string subgroup;
  std::vector<int32_t> job_ranks;
  // A subgroup of one node's ranks: that node's index in the job, which names its shared-memory segments as
  // the job's own group names that node's (-1: not such a subgroup).
  int32_t within_node = -1;
};

}  // namespace accel::distributed
