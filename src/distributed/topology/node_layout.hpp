// Which ranks share a node, for the all-reduce through shared memory: within a node the ranks reduce
// through one segment, between nodes one leader per node (its lowest rank) all-reduces over Gloo.
//
// A node is the set of ranks with the same key: the launcher's node index (GROUP_RANK) together with the
// host's name and boot id. The launcher alone is not trusted to put only ranks of one machine together (a
// node it names that spans machines splits into one per machine), and the machine alone would merge two
// nodes that a launcher deliberately starts on one machine (two `accel launch --node-rank` on loopback).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace accel::distributed {

// The rendezvous store, as much of it as the node discovery and the shared-memory segments' negotiation
// need. wait_get blocks until the key exists (throwing what the store throws on a timeout).
struct ShmExchange {
  std::function<void(const std::string& key, const std::string& value)> set;
  std::function<std::string(const std::string& key)> wait_get;
};

struct NodeLayout {
  int32_t node = 0;              // this rank's node; nodes are numbered in the order of their lowest rank
  int32_t local_rank = 0;        // this rank's index within its node, in rank order
  std::vector<int32_t> members;  // the ranks of this node, ascending: members[0] is its leader
  std::vector<int32_t> leaders;  // every node's leader, by node
  int32_t largest_node = 1;      // the most ranks any node has: 1 leaves shared memory nothing to do

  int32_t nodes() const { return static_cast<int32_t>(leaders.size()); }
  int32_t local_size() const { return static_cast<int32_t>(members.size()); }
  bool leader() const { return local_rank == 0; }
};

// The layout seen by `rank` when keys[r] is rank r's node key.
NodeLayout node_layout(int32_t rank, const std::vector<std::string>& keys);

// This process's node key: "<group_rank>@<hostname>/<boot id>" (group_rank -1: no launcher node index).
std::string this_node_key(int32_t group_rank);

// Collective over the store: every rank publishes its key (this_node_key) and reads everyone's, in rank order.
// Throws what the store throws (a timeout when a rank does not come).
std::vector<std::string> exchange_node_keys(int32_t rank, int32_t world_size, int32_t group_rank,
                                            const ShmExchange& exchange);
// node_layout of the keys exchange_node_keys gives.
NodeLayout discover_nodes(int32_t rank, int32_t world_size, int32_t group_rank, const ShmExchange& exchange);

// Why the nodes of `keys` (as node_layout reads them) are not equal runs of consecutive ranks ("node 1 has 3
// ranks, node 0 has 2"); empty when they are.
std::string uneven_nodes(const std::vector<std::string>& keys);

}  // namespace accel::distributed
