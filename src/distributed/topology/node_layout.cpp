#include "distributed/topology/node_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "core/files.hpp"

namespace accel::distributed {

NodeLayout node_layout(int32_t rank, const std::vector<std::string>& keys) {
  // Keys in the order of their first rank: that order numbers the nodes.
  std::map<std::string, int32_t> node_of_key;
  NodeLayout layout;
  std::vector<int32_t> node_of_rank(keys.size());
  std::vector<int32_t> sizes;
  for (size_t r = 0; r < keys.size(); ++r) {
    const auto inserted = node_of_key.emplace(keys[r], static_cast<int32_t>(layout.leaders.size()));
    if (inserted.second) {
      layout.leaders.push_back(static_cast<int32_t>(r));
      sizes.push_back(0);
    }
    node_of_rank[r] = inserted.first->second;
    ++sizes[static_cast<size_t>(node_of_rank[r])];
  }
  layout.node = node_of_rank[static_cast<size_t>(rank)];
  layout.largest_node = *std::max_element(sizes.begin(), sizes.end());
  for (size_t r = 0; r < keys.size(); ++r) {
    if (node_of_rank[r] != layout.node) continue;
    if (static_cast<int32_t>(r) == rank) layout.local_rank = static_cast<int32_t>(layout.members.size());
    layout.members.push_back(static_cast<int32_t>(r));
  }
  return layout;
}

std::string this_node_key(int32_t group_rank) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  // Two machines may share a host name (containers, cloned images); they never share a boot id. Without
  // /proc the host name has to do.
  std::string boot_id;
  try {
    boot_id = read_file("/proc/sys/kernel/random/boot_id");
  } catch (const std::exception&) {
  }
  boot_id.erase(std::remove(boot_id.begin(), boot_id.end(), '\n'), boot_id.end());
  return std::to_string(group_rank) + "@" + host + "/" + boot_id;
}

std::vector<std::string> exchange_node_keys(int32_t rank, int32_t world_size, int32_t group_rank,
                                            const ShmExchange& exchange) {
  exchange.set("accel/node/" + std::to_string(rank), this_node_key(group_rank));
  std::vector<std::string> keys;
  for (int32_t r = 0; r < world_size; ++r) keys.push_back(exchange.wait_get("accel/node/" + std::to_string(r)));
  return keys;
}

NodeLayout discover_nodes(int32_t rank, int32_t world_size, int32_t group_rank, const ShmExchange& exchange) {
  return node_layout(rank, exchange_node_keys(rank, world_size, group_rank, exchange));
}

std::string uneven_nodes(const std::vector<std::string>& keys) {
  const NodeLayout first = node_layout(0, keys);
  const int32_t size = first.local_size();
  for (int32_t n = 0; n < first.nodes(); ++n) {
    const NodeLayout node = node_layout(first.leaders[static_cast<size_t>(n)], keys);
    if (node.local_size() != size) {
      return "node " + std::to_string(n) + " has " + std::to_string(node.local_size()) + " ranks, node 0 has " +
             std::to_string(size);
    }
    for (int32_t k = 0; k < size; ++k) {
      if (node.members[static_cast<size_t>(k)] != n * size + k) {
        return "node " + std::to_string(n) + "'s ranks are not " + std::to_string(n * size) + " to " +
               std::to_string(n * size + size - 1);
      }
    }
  }
  return "";
}

}  // namespace accel::distributed
