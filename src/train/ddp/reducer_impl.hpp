// The reducer's state (train/ddp/reducer.hpp), shared by reducer.cpp (data parallelism's all-reduces) and
// reducer_zero.cpp (ZeRO's split: stage 2's reduce-scatters and the memory figures). Private to them.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/function.h>

#include "distributed/group/process_group.hpp"
#include "train/ddp/reducer.hpp"

namespace accel::train {

struct Reducer::Impl {
  struct Bucket {
    std::vector<size_t> members;  // parameter indices
    std::vector<int64_t> offsets;
    int64_t numel = 0;
    at::Tensor flat;
    at::Tensor wire;  // with grad_compression: the 16-bit copy of flat that is all-reduced instead
    // The number of processes as a 0-d tensor of flat's type: div's out= form with a tensor divisor has a
    // kernel of its own, where a Scalar divisor would compute into a temporary and copy it over.
    at::Tensor world_size;
    size_t pending = 0;
    std::unique_ptr<distributed::PendingAverage> work;
    // zero_stage 2: elements per rank's chunk; where this rank's averaged gradients stay between
    // backwards (a copy of its chunk, or with host_gradients its chunk of the bucket); the chunk of flat
    // the reduce-scatter writes, while it runs, and the reduce-scatter in flight.
    int64_t chunk = 0;
    at::Tensor owned;
    at::Tensor received;
    std::unique_ptr<distributed::PendingCollective> scatter;
    bool landed = false;  // this backward's reduce-scatter waited for and its chunk placed already
    double launched_us = 0;
    // Written by the transport's thread when the all-reduce ends; shared, since a broken group may end it
    // after the reducer is gone.
    std::shared_ptr<std::atomic<double>> done_us = std::make_shared<std::atomic<double>>(0.0);
  };

  std::shared_ptr<distributed::State> state;
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  ReducerConfig config;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;  // parameter index -> bucket index
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<uintptr_t> hook_keys;
  std::vector<bool> ready;
  std::vector<bool> locally_unused;  // this backward's parameters that got no gradient here (set by finalize)
  std::vector<bool> reached_by_no_rank;  // the last synchronising backward's parameters no rank's reached
  std::optional<std::vector<bool>> static_unused;  // with static_graph: the first backward's unused parameters
  std::optional<std::vector<bool>> static_unused_everywhere;  // and those of them that no rank used
  // How many ranks used each parameter in this backward, while it is all-reduced (kept here, as the
  // buckets are, for as long as the all-reduce may run).
  struct UseCount {
    at::Tensor ranks;
    std::unique_ptr<distributed::PendingCollective> work;
  };
  std::optional<UseCount> use_count;
  ZeroPartition partition;
  std::vector<ZeroPiece> own_pieces;  // partition.pieces_of(rank), worked out once at prepare
  // zero_stage 2 through shared memory on one node, whose reduce-scatter sums each element in the rank order
  // of its all-reduce: the buckets are laid out in rank chunks and reduce-scattered. Elsewhere (Gloo, whose
  // ring starts an element's sum at a rank that depends on its place in the buffer, or several nodes) the
  // buckets are averaged as under stage 0, for the same bits, and the other ranks' gradients dropped after.
  bool scatter = false;
  bool scatters_bit_identically();
  size_t next_bucket = 0;
  bool expect_hooks = false;
  bool finalize_queued = false;
  double helper_cpu_at_first_gradient = 0;  // seconds, the helper thread's clock
  int64_t copied_bytes = 0;                  // this backward's, into the buckets and out
  std::mutex mutex;
  GradSyncReport report;
  mutable std::mutex report_mutex;  // apart from mutex, which finalize holds while it waits

  void assign_buckets();
  void split_for_zero();
  void refuse_what_zero_cannot_do() const;
  void launch_scatter(Bucket& bucket, distributed::BucketAverage average);
  void land_scatters_before(size_t bucket);
  void wait(Bucket& bucket);
  void place_zero_gradients(Bucket& bucket);
  void drop_gradients_of_others();
  void refuse_what_the_transport_cannot_carry();
  void reset_for_backward();
  void mark_ready(size_t index);
  void launch_ready_buckets();
  void launch(Bucket& bucket);
  distributed::Transport& transport(const char* what);
  void finalize();
  void account(double backward_end_us, double wait_end_us);
  double helper_cpu_seconds();
  int64_t gradient_bytes_held() const;
  std::string names_of(const std::vector<bool>& which) const;
  void start_use_count(const std::vector<bool>& unused);
  std::vector<bool> gradients_to_keep();
  // A bucket's slot of its member m, shaped as the parameter; parameter index's slot in its bucket.
  at::Tensor slot(const Bucket& bucket, size_t m) const;
  at::Tensor slot(size_t index) const;
};

inline int64_t bytes_of(const at::Tensor& tensor) { return tensor.numel() * static_cast<int64_t>(tensor.element_size()); }

}  // namespace accel::train
