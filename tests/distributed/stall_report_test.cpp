#include <gtest/gtest.h>

#include "distributed/stall_report.hpp"

namespace accel::distributed {
namespace {

TEST(StallReport, RecordsSurviveTheStore) {
  const CollectiveRecord record{12, 1700000000123, true, "DDP gradient all-reduce"};
  const auto decoded = decode_record(encode_record(record));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->sequence, 12);
  EXPECT_EQ(decoded->started_ms, 1700000000123);
  EXPECT_TRUE(decoded->gave_up);
  EXPECT_EQ(decoded->what, "DDP gradient all-reduce");
  EXPECT_FALSE(decode_record("12 oops running gather").has_value());
  EXPECT_FALSE(decode_record("12 5 sleeping gather").has_value());
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

TEST(StallReport, RendezvousListsTheRanksThatNeverArrived) {
  const CollectiveRecord arrived{0, 0, false, "rendezvous"};
  EXPECT_EQ(rendezvous_report({arrived, std::nullopt, arrived, std::nullopt}),
            "ranks 1, 3 never reached the rendezvous (ranks 0, 2 did)");
  EXPECT_EQ(rendezvous_report({arrived, arrived}), "every rank reached the rendezvous store");
}

}  // namespace
}  // namespace accel::distributed
