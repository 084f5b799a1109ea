// The arithmetic behind the gradient synchronisation figures: the union of all-reduce intervals split at
// backward's end, and the figures' names.
#include <gtest/gtest.h>

#include "expect_error.hpp"
#include "train/ddp/grad_sync_stats.hpp"

namespace {

using namespace accel;
using namespace accel::train;

TEST(GradSyncStats, UnionCountsOverlappingAllReducesOnceAndSplitsAtBackwardsEnd) {
  // Buckets queued behind each other ([0, 4] and [1, 6] overlap), then a gap, then one started late.
  const UnionLength length = union_length({{1, 6}, {0, 4}, {8, 10}}, 5);
  EXPECT_DOUBLE_EQ(length.total_us, 8);   // [0, 6] and [8, 10]
  EXPECT_DOUBLE_EQ(length.before_us, 5);  // [0, 5]
  EXPECT_DOUBLE_EQ(union_length({{0, 2}, {3, 4}}, 10).before_us, 3);
  EXPECT_DOUBLE_EQ(union_length({{3, 4}}, 1).before_us, 0);
  EXPECT_DOUBLE_EQ(union_length({}, 1).total_us, 0);
}

TEST(GradSyncStats, FiguresByNameAreTotalsOrTheLastBackwards) {
  GradSyncReport report;
  report.last.syncs = 1;
  report.last.exposed_ms = 0.5;
  report.total.syncs = 3;
  report.total.bytes = 96;
  report.total += report.last;  // the operator adds every field
  EXPECT_EQ(grad_sync_figure(report, "syncs"), 4);
  EXPECT_EQ(grad_sync_figure(report, "bytes"), 96);
  EXPECT_EQ(grad_sync_figure(report, "exposed_ms"), 0.5);
  EXPECT_EQ(grad_sync_figure(report, "last_syncs"), 1);
  EXPECT_EQ(grad_sync_figure(report, "last_reduce_ms"), 0);
  report.total.wait_ms = 2;
  EXPECT_EQ(grad_sync_figure(report, "wait_ms"), 2);
  expect_error(Code::InvalidArgument, "overlapped_ms", [&] { grad_sync_figure(report, "overlap"); });
  expect_error(Code::InvalidArgument, "prefix last_", [&] { grad_sync_figure(report, "last_"); });
}

}  // namespace
