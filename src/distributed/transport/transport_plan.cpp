#include "distributed/transport/transport_plan.hpp"

#include "core/error.hpp"

namespace accel::distributed {

TransportPlan plan_transport(const LaunchInfo& launch, const std::string& backend, const std::string& transport,
                             bool cuda) {
  TransportPlan plan;
  plan.name = backend;
  if (transport == "shm" && backend != "gloo") {
    fail(Code::Unsupported, "intra_node_transport 'shm' needs backend 'gloo', not '" + backend + "'");
  }
  if (transport == "shm" && launch.local_world_size == 1) {
    fail(Code::Unsupported, "intra_node_transport 'shm' needs several ranks on a node, but LOCAL_WORLD_SIZE is 1 (of " +
                                std::to_string(launch.world_size) + " ranks): every rank is alone on its node");
  }
  if (transport == "gloo") {
    plan.reason = "intra_node_transport is 'gloo'";
    return plan;
  }
  if (backend != "gloo") {
    plan.reason = "backend '" + backend + "' carries every collective";
    return plan;
  }
  // Under auto, CUDA tensors stay with the backend and so does everything else.
  if (transport == "auto" && cuda) {
    plan.reason = "the device is a GPU";
    return plan;
  }
  if (launch.local_world_size == 1) {
    plan.reason = "every rank is alone on its node (LOCAL_WORLD_SIZE=1)";
    return plan;
  }
  plan.shared_memory = true;
  plan.required = transport == "shm";
  const std::string local = std::to_string(launch.local_world_size);
  if (launch.local_world_size == launch.world_size) {
    plan.name = backend + "+shm";
    plan.reason = "shared memory among the " + local + " ranks of this host";
  } else {
    plan.name = backend + "+hier-shm";
    plan.reason = "shared memory among the " + local + " ranks of each node, Gloo between one leader per node; " +
                  std::to_string(launch.world_size) + " ranks in all";
  }
  return plan;
}

}  // namespace accel::distributed
