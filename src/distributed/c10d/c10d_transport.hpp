// c10d's backend as a transport (transport.hpp): Gloo (CPU tensors, and CUDA tensors through host memory) or
// NCCL, on LibTorch 1.13 or 2.x; c10d_transport.cpp is the one place where their APIs differ. Reduce-scatter
// is NCCL's own; Gloo has none (LibTorch 1.13: "ProcessGroupGloo does not support reduce_scatter"), so there
// it is an all-reduce of a copy of the input of which each rank keeps its slice: the same sums, twice the
// bytes. Every collective starts and ends through the group's GroupHealth, which words its failures.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/topology/node_layout.hpp"
#include "distributed/transport/transport.hpp"
#include "distributed/transport/shm_element.hpp"

namespace accel::distributed {

class GroupHealth;

class C10dTransport final : public Transport {
 public:
  // Collective: the backend's own rendezvous over health's store (Gloo connects every pair of ranks).
  // Throws what c10d throws, or Error(Unsupported) for NCCL in a build without it.
  static std::unique_ptr<C10dTransport> create(GroupHealth& health);
  ~C10dTransport() override;
  C10dTransport(const C10dTransport&) = delete;
  C10dTransport& operator=(const C10dTransport&) = delete;

  std::unique_ptr<PendingCollective> allreduce_async(at::Tensor& tensor, ReduceKind kind, const char* what,
                                                     std::function<void()> on_complete = {}) override;
  std::unique_ptr<PendingCollective> reduce_scatter_async(at::Tensor& output, const at::Tensor& input, ReduceKind kind,
                                                          const char* what) override;
  std::unique_ptr<PendingCollective> all_gather_async(at::Tensor& output, const at::Tensor& input,
                                                      const char* what) override;
  // NCCL, or LibTorch 2.x's Gloo (1.13's says "Invalid scalar type").
  bool carries_bfloat16() const override;

  // outputs[r] receives rank r's input; every rank's input must have the same size.
  void allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, const char* what);
  void broadcast(at::Tensor& tensor, int32_t root, const char* what);

  struct Impl;

 private:
  explicit C10dTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The hierarchical pair's Gloo half: one Gloo group of every node's leader (node_layout.hpp), which
// all-reduces each node's sum in place in the node's segment: the segments' leader step
// (shm_allreduce.hpp). Its operations are not recorded: the ranks wait for them inside the shared-memory
// collective that is.
class LeadersGroup {
 public:
  // Failures name the leaders of `layout`.
  explicit LeadersGroup(const NodeLayout& layout);
  ~LeadersGroup();
  LeadersGroup(const LeadersGroup&) = delete;
  LeadersGroup& operator=(const LeadersGroup&) = delete;

  // Collective among the nodes' leaders (called on them only): Gloo's rendezvous over health's store.
  void connect(GroupHealth& health, const NodeLayout& layout);
  // The leader step, once connected; throws Error naming the leaders.
  void allreduce(void* data, int64_t numel, ShmElement type, ReduceKind kind);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::distributed
