// How a job's shared-memory segments are named, shared by the all-reduce that makes them and by
// `accel launch`, which removes what a crashed job left (no rank of another job can use the same master
// port on this host while the job runs: rank 0's store holds it).
#pragma once

#include <cstdint>
#include <string>

namespace accel::distributed {

// Segments of node `node` (NodeLayout::node, which is `accel launch --node-rank`) of the job whose master
// port is `port` are named "/" + this + a random id + an epoch: the launchers of two nodes started on one
// host remove only their own.
inline std::string shm_segment_prefix(uint16_t port, int32_t node) {
  return "accel-" + std::to_string(port) + "-n" + std::to_string(node) + "-";
}

}  // namespace accel::distributed
