#include <gtest/gtest.h>

#include "distributed/health/stall_report.hpp"

namespace accel::distributed {
namespace {

TEST(StallReport, RecordsSurviveTheStore) {
  const CollectiveRecord record{12, 1700000000123, true, "DDP gradient all-reduce", "shm-all-reduce"};
  const auto decoded = decode_record(encode_record(record));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->sequence, 12);
  EXPECT_EQ(decoded->started_ms, 1700000000123);
  EXPECT_TRUE(decoded->gave_up);
  EXPECT_FALSE(decoded->out_of_step);
  EXPECT_EQ(decoded->what, "DDP gradient all-reduce");
  EXPECT_EQ(decoded->kind, "shm-all-reduce");
  CollectiveRecord out_of_step = record;
  out_of_step.out_of_step = true;
  const auto decoded_out_of_step = decode_record(encode_record(out_of_step));
  ASSERT_TRUE(decoded_out_of_step.has_value());
  EXPECT_TRUE(decoded_out_of_step->gave_up && decoded_out_of_step->out_of_step);
  EXPECT_FALSE(decode_record("12 oops running all-gather gather").has_value());
  EXPECT_FALSE(decode_record("12 5 sleeping all-gather gather").has_value());
  EXPECT_FALSE(decode_record("12 5 running").has_value());
  EXPECT_NE(record_key(0), record_key(1));
}

TEST(StallReport, NamesTheRanksThatDidNotJoinAndWhereEachIs) {
  const int64_t now = 1000000;
  const CollectiveRecord mine{5, now - 3000, true, "gather"};
  const std::vector<std::optional<CollectiveRecord>> records{
      mine, CollectiveRecord{5, now - 2900, false, "gather"}, CollectiveRecord{4, now - 3100, false, "wait_for_everyone"},
      std::nullopt};
  const std::string report = stall_report(mine, records, now);
  EXPECT_NE(report.find("ranks 2, 3 did not join collective #5 gather"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 0: gave up on #5 gather, started 3.0 s ago"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1: in #5 gather for 2.9 s"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2: has not joined; the last collective it started is #4 wait_for_everyone, 3.1 s ago"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("rank 3: no record"), std::string::npos) << report;
}

TEST(StallReport, CallsOutCollectivesIssuedInDifferentOrders) {
  const CollectiveRecord mine{5, 0, false, "gather"};
  const std::string report = stall_report(mine, {mine, CollectiveRecord{5, 0, false, "broadcast"}}, 1500);
  EXPECT_NE(report.find("every rank reached collective #5 gather"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1: is in a different collective at the same point: #5 broadcast for 1.5 s"),
            std::string::npos)
      << report;
}

// Rank 0 called save_state (announced, so its kind is the operation) where rank 1 went on training.
TEST(OutOfStep, ACollectiveOfAnotherKindUnderTheSameNumberIsProof) {
  const CollectiveRecord bucket{7, 0, false, "DDP gradient all-reduce", "shm-all-reduce"};
  const CollectiveRecord save{7, 0, false, "save_state", "save_state"};
  const auto on_rank_1 = out_of_step_report(1, bucket, {save, bucket});
  ASSERT_TRUE(on_rank_1.has_value());
  EXPECT_NE(on_rank_1->find("collectives out of step: this rank (1) is in #7 DDP gradient all-reduce (shm-all-reduce) "
                            "while rank 0 is in #7 save_state;"),
            std::string::npos)
      << *on_rank_1;
  EXPECT_NE(on_rank_1->find("call them on every process"), std::string::npos) << *on_rank_1;
  const CollectiveRecord barrier{7, 0, false, "wait_for_everyone", "barrier"};
  const auto on_rank_0 = out_of_step_report(0, save, {save, barrier});
  ASSERT_TRUE(on_rank_0.has_value());
  EXPECT_NE(on_rank_0->find("this rank (0) is in #7 save_state while rank 1 is in #7 wait_for_everyone (barrier)"),
            std::string::npos)
      << *on_rank_0;
}

TEST(OutOfStep, SlowOrAheadRanksAndOtherNamesOfOneKindProveNothing) {
  const CollectiveRecord gather{7, 0, false, "gather", "all-gather"};
  // Same number and kind under another name: the backend matches them; a wait there is a slow rank.
  EXPECT_FALSE(out_of_step_report(0, gather, {gather, CollectiveRecord{7, 0, false, "gather_bytes", "all-gather"}}));
  // Behind (still computing) or ahead (its later buckets started while it waits for this one).
  EXPECT_FALSE(out_of_step_report(0, gather, {gather, CollectiveRecord{6, 0, false, "wait_for_everyone", "barrier"}}));
  EXPECT_FALSE(out_of_step_report(0, gather, {gather, CollectiveRecord{9, 0, false, "DDP gradient all-reduce", "all-reduce"}}));
  // A rank that gave up on a timeout is reported by the timeout's stall report, not here.
  EXPECT_FALSE(out_of_step_report(0, gather, {gather, CollectiveRecord{7, 0, true, "gather", "all-gather"}}));
  EXPECT_FALSE(out_of_step_report(0, gather, {gather, std::nullopt}));
}

// A rank that gave up because it found the ranks out of step has left the group: whatever number it gave up
// on, nobody completes anything with it any more.
TEST(OutOfStep, ARankThatFoundThemOutOfStepIsProof) {
  const CollectiveRecord save{6, 0, false, "save_state", "save_state"};
  CollectiveRecord given_up{5, 0, true, "DDP gradient all-reduce", "all-reduce"};
  given_up.out_of_step = true;
  const auto report = out_of_step_report(0, save, {save, given_up});
  ASSERT_TRUE(report.has_value());
  EXPECT_NE(report->find("this rank (0) is in #6 save_state while rank 1 gave up on #5 DDP gradient all-reduce "
                         "(all-reduce), having found the ranks out of step"),
            std::string::npos)
      << *report;
}

TEST(StallReport, RendezvousListsTheRanksThatNeverArrived) {
  const CollectiveRecord arrived{0, 0, false, "rendezvous"};
  EXPECT_EQ(rendezvous_report({arrived, std::nullopt, arrived, std::nullopt}),
            "ranks 1, 3 never reached the rendezvous (ranks 0, 2 did)");
  EXPECT_EQ(rendezvous_report({arrived, arrived}), "every rank reached the rendezvous store");
}

}  // namespace
}  // namespace accel::distributed
