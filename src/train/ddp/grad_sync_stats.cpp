#include "train/ddp/grad_sync_stats.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace accel::train {

GradSyncStats& GradSyncStats::operator+=(const GradSyncStats& other) {
  syncs += other.syncs;
  bytes += other.bytes;
  copied_bytes += other.copied_bytes;
  reduce_ms += other.reduce_ms;
  overlapped_ms += other.overlapped_ms;
  exposed_ms += other.exposed_ms;
  wait_ms += other.wait_ms;
  helper_cpu_ms += other.helper_cpu_ms;
  return *this;
}

namespace {

bool figure_of(const GradSyncStats& stats, const std::string& name, double* out) {
  if (name == "syncs") {
    *out = static_cast<double>(stats.syncs);
  } else if (name == "bytes") {
    *out = static_cast<double>(stats.bytes);
  } else if (name == "copied_bytes") {
    *out = static_cast<double>(stats.copied_bytes);
  } else if (name == "reduce_ms") {
    *out = stats.reduce_ms;
  } else if (name == "overlapped_ms") {
    *out = stats.overlapped_ms;
  } else if (name == "exposed_ms") {
    *out = stats.exposed_ms;
  } else if (name == "wait_ms") {
    *out = stats.wait_ms;
  } else if (name == "helper_cpu_ms") {
    *out = stats.helper_cpu_ms;
  } else {
    return false;
  }
  return true;
}

}  // namespace

double grad_sync_figure(const GradSyncReport& report, const std::string& name) {
  if (name == "gradient_bytes") return static_cast<double>(report.gradient_bytes);
  if (name == "optimizer_state_bytes") return static_cast<double>(report.optimizer_state_bytes);
  if (name == "unit_gathers") return static_cast<double>(report.unit_gathers);
  if (name == "unit_prefetches") return static_cast<double>(report.unit_prefetches);
  if (name == "unit_gather_wait_ms") return report.unit_gather_wait_ms;
  const std::string last = "last_";
  double value = 0;
  const bool found = name.compare(0, last.size(), last) == 0 ? figure_of(report.last, name.substr(last.size()), &value)
                                                             : figure_of(report.total, name, &value);
  if (!found) {
    fail(Code::InvalidArgument, "no gradient synchronisation figure '" + name +
                                    "': the figures are syncs, bytes, copied_bytes, reduce_ms, overlapped_ms, exposed_ms, "
                                    "wait_ms and helper_cpu_ms (totals), each also with the prefix last_ (the last backward's), "
                                    "gradient_bytes, optimizer_state_bytes, unit_gathers, unit_prefetches and "
                                    "unit_gather_wait_ms");
  }
  return value;
}

UnionLength union_length(std::vector<TimeInterval> intervals, double split_us) {
  std::sort(intervals.begin(), intervals.end(),
            [](const TimeInterval& a, const TimeInterval& b) { return a.start_us < b.start_us; });
  UnionLength length;
  // Merges overlapping intervals in start order; each merged run is counted once.
  auto add = [&](double start, double end) {
    length.total_us += end - start;
    length.before_us += std::max(0.0, std::min(end, split_us) - start);
  };
  bool open = false;
  double run_start = 0, run_end = 0;
  for (const auto& interval : intervals) {
    const double end = std::max(interval.start_us, interval.end_us);
    if (open && interval.start_us <= run_end) {
      run_end = std::max(run_end, end);
      continue;
    }
    if (open) add(run_start, run_end);
    open = true;
    run_start = interval.start_us;
    run_end = end;
  }
  if (open) add(run_start, run_end);
  return length;
}

}  // namespace accel::train
