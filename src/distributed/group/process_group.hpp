// The process group: the rendezvous, the transports that carry its collectives (transport.hpp), and the
// verdicts on their failures (group_health.hpp), with c10d kept out of this header. All c10d and
// LibTorch-version differences (1.13 vs 2.x) live in c10d_transport.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/topology/group_config.hpp"
#include "distributed/transport/transport.hpp"

namespace accel::distributed {

class ProcessGroup;

// The job's ranks cut by node (node_layout.hpp), for hybrid sharding (FSDP's HYBRID_SHARD): the state is split
// over the ranks of each node and every node holds the same.
struct NodeSplit {
  int32_t node = 0;        // this rank's node, 0 .. nodes - 1
  int32_t nodes = 1;
  int32_t local_rank = 0;  // this rank's place in its node
  int32_t local_size = 1;  // ranks per node, the same on every node
  // This node's ranks, in rank order (one rank: a group of one; one node: the job's group itself).
  ProcessGroup* within_node = nullptr;
  ProcessGroup* across_nodes = nullptr;  // every node's rank of this local rank, by node; nullptr with one node
};

// One rendezvous, one c10d process group and, with GroupConfig::shared_memory, the shared-memory transport
// in front of it. Every operation blocks until done and throws accel::Error:
// Timeout when a rank does not take part within the timeout, PeerFailed when a rank went away,
// InvalidState ("collectives out of step", naming the ranks and what each is in) when the ranks issued
// different collectives at the same point, such as save_state on rank 0 only while rank 1 goes on to its
// next gradient all-reduce or a barrier: a wait that lasts a couple of seconds reads the other ranks'
// records (stall_report.hpp, watched_wait.hpp), and a rank in a collective of another kind under the same
// sequence number, or one that gave up for that reason, ends it on every rank within seconds, whatever the
// timeout. After any of these, the group is broken: every later call throws InvalidState at once, naming
// the first failure. Not thread-safe: one collective at a time, issued in the same order on every rank.
class ProcessGroup {
 public:
  // Collective: blocks until every rank has joined (Timeout otherwise).
  static std::unique_ptr<ProcessGroup> create(const GroupConfig& config);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int32_t rank() const;
  int32_t world_size() const;
  // Broken itself, or one of its subgroups (split_by_node): the job cannot go on either way.
  bool broken() const;
  // Whether all-reduces of CPU tensors go through shared memory (GroupConfig::shared_memory, and it worked).
  bool uses_shared_memory() const;
  // Whether those join several nodes' segments through the nodes' leaders.
  bool shared_memory_spans_nodes() const;
  // Whether all-reduces of bfloat16 tensors can be carried: by shared memory on one node, NCCL or LibTorch
  // 2.x's Gloo, not by 1.13's Gloo ("Invalid scalar type"), which also joins the nodes' leaders.
  bool allreduces_bfloat16() const;
  // The message of the failure that broke the group (or, failing nothing of its own, a subgroup); empty while
  // it is not broken.
  const std::string& first_failure() const;

  // What carries the group's all-reduces, averages of buckets, reduce-scatters and all-gathers: shared memory
  // (and the backend for what it does not carry) or the backend. `what` in its calls names the user-facing
  // operation in error messages.
  Transport& transport();
  // Collectives started so far on this rank (tests count them to prove that none happened).
  int64_t collectives_started() const;
  // The next collective this rank starts is the first of `operation` (one word: "save_state"), which every
  // rank must call: its record names it and goes to the store at once. A rank that is in any other
  // collective at that point, and this one, then fail within seconds (see below) instead of waiting out
  // the timeout.
  void announce(const char* operation);
  // The operation announced for the next collective ("save_state"), or empty.
  const std::string& announced_operation() const;
  // outputs[r] receives rank r's input; every rank's input must have the same size.
  void allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, const char* what);
  void broadcast(at::Tensor& tensor, int32_t root, const char* what);

  // The group of the job cut by node (NodeSplit), made on the first call: collective then (every rank calls it
  // at the same point: the subgroups' rendezvous), the same answer after. The subgroups are this group's:
  // they go with it, and their failures name the job's ranks. Within a node the subgroup uses shared
  // memory when this group does. Error(Unsupported) on every rank when the nodes differ in size or a
  // node's ranks are not consecutive (the layout `accel launch` and torchrun give), which hybrid sharding
  // needs so that the first node's ranks 0 .. local_size - 1 write the checkpoints' shares; otherwise what
  // a rendezvous throws.
  const NodeSplit& split_by_node();

 private:
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::distributed
