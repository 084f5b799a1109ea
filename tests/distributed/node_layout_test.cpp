#include <gtest/gtest.h>

#include "core/error.hpp"
#include "distributed/topology/node_layout.hpp"
#include "distributed/transport/transport_plan.hpp"

namespace accel::distributed {
namespace {

TEST(NodeLayout, NodesAreNumberedByTheirLowestRank) {
  // Two launcher nodes on one machine stay two nodes; ranks interleaved across them still group by key.
  const std::vector<std::string> keys{"1@a/x", "0@a/x", "1@a/x", "0@a/x", "0@a/x"};
  const auto layout = node_layout(3, keys);
  EXPECT_EQ(layout.node, 1);
  EXPECT_EQ(layout.local_rank, 1);
  EXPECT_EQ(layout.members, (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(layout.leaders, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(layout.largest_node, 3);
  EXPECT_FALSE(layout.leader());
  EXPECT_TRUE(node_layout(0, keys).leader());
}

TEST(NodeLayout, OneRankPerNode) {
  const auto layout = node_layout(1, {"0@a/x", "0@b/y", "0@c/z"});
  EXPECT_EQ(layout.nodes(), 3);
  EXPECT_EQ(layout.node, 1);
  EXPECT_EQ(layout.local_size(), 1);
  EXPECT_EQ(layout.largest_node, 1);
}

TEST(NodeLayout, KeyNamesTheLauncherNodeAndTheMachine) {
  const std::string key = this_node_key(3);
  EXPECT_EQ(key.rfind("3@", 0), 0u) << key;
  EXPECT_NE(this_node_key(0), key);
  EXPECT_EQ(this_node_key(3), key);
}

LaunchInfo launch(int32_t world, int32_t local) {
  LaunchInfo info;
  info.world_size = world;
  info.local_world_size = local;
  return info;
}

TEST(TransportPlan, SharedMemoryOnOneHostAndAcrossNodes) {
  auto plan = plan_transport(launch(4, 4), "gloo", "auto", false);
  EXPECT_TRUE(plan.shared_memory);
  EXPECT_FALSE(plan.required);
  EXPECT_EQ(plan.name, "gloo+shm");
  plan = plan_transport(launch(4, 2), "gloo", "auto", false);
  EXPECT_TRUE(plan.shared_memory);
  EXPECT_EQ(plan.name, "gloo+hier-shm");
  plan = plan_transport(launch(4, 2), "gloo", "shm", false);
  EXPECT_TRUE(plan.required);
  EXPECT_EQ(plan.name, "gloo+hier-shm");
}

TEST(TransportPlan, GlooWhereSharedMemoryHasNothingToDo) {
  EXPECT_EQ(plan_transport(launch(4, 2), "gloo", "gloo", false).name, "gloo");
  EXPECT_FALSE(plan_transport(launch(4, 2), "gloo", "gloo", false).shared_memory);
  EXPECT_FALSE(plan_transport(launch(4, 1), "gloo", "auto", false).shared_memory);
  EXPECT_FALSE(plan_transport(launch(4, 4), "gloo", "auto", true).shared_memory);
  EXPECT_EQ(plan_transport(launch(4, 4), "nccl", "auto", true).name, "nccl");
  EXPECT_THROW(plan_transport(launch(4, 1), "gloo", "shm", false), Error);
  EXPECT_THROW(plan_transport(launch(4, 4), "nccl", "shm", true), Error);
}

// Hybrid sharding needs nodes of equal size whose ranks run consecutively (ProcessGroup::split_by_node).
TEST(NodeLayout, UnevenNodesAreNamed) {
  EXPECT_EQ(uneven_nodes({"a", "a", "b", "b"}), "");
  EXPECT_EQ(uneven_nodes({"a", "a", "a"}), "");
  EXPECT_EQ(uneven_nodes({"a", "b", "c"}), "");
  EXPECT_EQ(uneven_nodes({"a", "a", "b"}), "node 1 has 1 ranks, node 0 has 2");
  EXPECT_EQ(uneven_nodes({"a", "b", "a", "b"}), "node 0's ranks are not 0 to 1");
  EXPECT_EQ(uneven_nodes({"a", "b", "b", "a"}), "node 0's ranks are not 0 to 1");
}

}  // namespace
}  // namespace accel::distributed
