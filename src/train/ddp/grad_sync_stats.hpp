// What the gradient all-reduces of data-parallel backwards cost, split by whether backward was still
// computing gradients meanwhile (the all-reduce overlapped it) or had finished and waited for them
// (exposed): the figures that say whether bucketing hides communication on this machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace accel::train {

struct GradSyncStats {
  int64_t syncs = 0;         // synchronising backwards counted (accumulating ones all-reduce nothing)
  int64_t bytes = 0;         // bytes this rank all-reduced: the buckets as sent (halved by grad_compression)
  int64_t copied_bytes = 0;  // gradient bytes copied into the buckets before the all-reduces and out after
  double reduce_ms = 0;      // wall time during which at least one bucket's all-reduce was in flight
  double overlapped_ms = 0;  // the part of reduce_ms before backward had computed its last gradient
  double exposed_ms = 0;     // the rest: all-reduce time after it, which backward waited for
  double wait_ms = 0;        // how long backward waited, measured on its thread: exposed_ms plus the
                             // wake-up once the last all-reduce ended (long on a machine with busy cores)
  double helper_cpu_ms = 0;  // CPU time of the thread that ran the all-reduces (shared memory's; 0 under Gloo,
                             // whose threads are its own)
  GradSyncStats& operator+=(const GradSyncStats& other);
};

// The last synchronising backward's figures, and their sums since the model was prepared.
struct GradSyncReport {
  GradSyncStats last;
  GradSyncStats total;
  // The memory ZeRO splits, on this rank: the bytes of gradient memory held once the last synchronising
  // backward ended (the storages of the parameters' gradients and of the reducer's buckets, each counted
  // once), and the optimizer state (momentum buffers, Adam's moments) of accel's optimizers over the model
  // after their last step or load.
  int64_t gradient_bytes = 0;
  int64_t optimizer_state_bytes = 0;
  // ZeRO stage 3's parameter gathers since prepare (ShardedUnits::gather_figures).
  int64_t unit_gathers = 0;
  int64_t unit_prefetches = 0;
  double unit_gather_wait_ms = 0;
};

// One figure by name, as the C API asks for it: "syncs", "bytes", "copied_bytes", "reduce_ms", "overlapped_ms",
// "exposed_ms", "wait_ms", "helper_cpu_ms" (totals), each also with the prefix "last_" (the last backward's);
// and "gradient_bytes", "optimizer_state_bytes", "unit_gathers", "unit_prefetches", "unit_gather_wait_ms"
// (GradSyncReport's).
// Throws Error(InvalidArgument) for another name, listing these.
double grad_sync_figure(const GradSyncReport& report, const std::string& name);

struct TimeInterval {
  double start_us;
  double end_us;
};

// The length of the union of the intervals, and of its part before split_us.
struct UnionLength {
  double total_us = 0;
  double before_us = 0;
};
UnionLength union_length(std::vector<TimeInterval> intervals, double split_us);

}  // namespace accel::train
