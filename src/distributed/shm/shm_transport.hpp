// The shared-memory transport (transport.hpp): the collectives of CPU float tensors among the ranks of a
// node go through the node's segment (shm_allreduce.hpp), on a thread of the transport's (shm_thread.hpp).
// Across nodes the segments pair with a Gloo group of the nodes' leaders (LeadersGroup): the hierarchical
// pair, whose reduce-scatter is its all-reduce of which each rank keeps its slice.
// What it does not carry goes to `backend`, c10d's transport: tensors of other types or devices, all-gathers
// across nodes (a gather sums nothing that the leaders could save), and everything once shared memory was
// given up (a segment could not grow; every rank gives up alike).
// The buckets it hands out (bucket_empty) live in resident segments of their own and are reduced where they
// are. Averaging such a bucket on one node, each rank reduces its share of the bucket (the elements it sums
// for every rank) straight from its gradients, where the gradients may receive the result: that share is
// neither copied into the bucket nor out of it.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>

#include "distributed/transport/transport.hpp"
#include "distributed/shm/shm_allreduce.hpp"

namespace accel::distributed {

class C10dTransport;
class GroupHealth;

class ShmTransport final : public Transport {
 public:
  // Collective over health's store: finds which ranks share a node and maps each node's segment (and, across
  // nodes, connects the leaders). nullptr on every rank alike when shared memory cannot serve (every node
  // has one rank, a segment could not be made): rank 0 says why on stderr, or, with the config's
  // shared_memory_required, Error(Io) on every rank. Throws what the store throws.
  static std::unique_ptr<ShmTransport> create(GroupHealth& health, C10dTransport& backend);
  ~ShmTransport() override;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  // Whether shared memory still carries collectives (not given up).
  bool active() const;
  // Whether the segments of several nodes are joined through their leaders.
  bool spans_nodes() const;

  std::unique_ptr<PendingCollective> allreduce_async(at::Tensor& tensor, ReduceKind kind, const char* what,
                                                     std::function<void()> on_complete = {}) override;
  std::unique_ptr<PendingAverage> average_async(BucketAverage average, const char* what,
                                                std::function<void()> on_complete = {}) override;
  std::unique_ptr<PendingCollective> reduce_scatter_async(at::Tensor& output, const at::Tensor& input, ReduceKind kind,
                                                          const char* what) override;
  std::unique_ptr<PendingCollective> all_gather_async(at::Tensor& output, const at::Tensor& input,
                                                      const char* what) override;
  // A piece of a resident segment, kept mapped by the tensor and its views (also after the group is gone);
  // undefined for a type shared memory does not carry, or when the segment could not be made (rank 0 says
  // so once). Throws like a collective when the ranks cannot agree.
  at::Tensor bucket_empty(int64_t numel, const at::Tensor& like) override;
  // On one node; across nodes as the leaders' Gloo (the backend's).
  bool carries_bfloat16() const override;
  double helper_cpu_seconds() const override;

  struct Impl;

 private:
  explicit ShmTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::distributed
