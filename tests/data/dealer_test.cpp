// The incremental dealers (what the bindings deal through) against the eager functions the library's own
// loader runs, over many settings: the same batches in the same order, the same lengths and remainders.
#include "data/dealer.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "expect_error.hpp"

namespace accel::data {
namespace {

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(i);
  return out;
}

std::vector<Batch> run(Dealer& dealer, const std::vector<Batch>& pushes) {
  std::vector<Batch> out;
  for (const auto& batch : pushes) {
    dealer.push(batch);
    while (auto next = dealer.next()) out.push_back(std::move(*next));
  }
  dealer.finish();
  while (auto next = dealer.next()) out.push_back(std::move(*next));
  return out;
}

struct Setting {
  int64_t n, batch_size, processes, rank;
  bool drop_last, split, even;
  std::string describe() const {
    return "n=" + std::to_string(n) + " batch_size=" + std::to_string(batch_size) + " P=" + std::to_string(processes) +
           " rank=" + std::to_string(rank) + " drop_last=" + std::to_string(drop_last) + " split=" + std::to_string(split) +
           " even=" + std::to_string(even);
  }
};

std::vector<Setting> settings() {
  std::mt19937_64 random(20261128);
  std::vector<Setting> out;
  for (int i = 0; i < 600; ++i) {
    Setting s{};
    s.processes = 1 + static_cast<int64_t>(random() % 4);
    s.rank = static_cast<int64_t>(random() % static_cast<uint64_t>(s.processes));
    s.split = random() % 2 == 0;
    s.batch_size = (1 + static_cast<int64_t>(random() % 4)) * (s.split ? s.processes : 1);
    s.n = static_cast<int64_t>(random() % 41);
    s.drop_last = random() % 2 == 0;
    s.even = random() % 2 == 0;
    out.push_back(s);
  }
  return out;
}

TEST(Dealer, AShardDealsAsShardBatchesAndCountsWhatItYields) {
  for (const auto& s : settings()) {
    const auto base = make_batches(range(s.n), s.batch_size, s.drop_last);
    const auto dealer = make_shard_dealer(BaseSampler{s.batch_size, s.drop_last}, ShardSpec{s.processes, s.rank, s.split, s.even});
    const auto dealt = run(*dealer, base);
    EXPECT_EQ(dealt, shard_batches(base, s.batch_size, s.drop_last, s.processes, s.rank, s.split, s.even)) << s.describe();
    EXPECT_EQ(dealer->length(static_cast<int64_t>(base.size()), base.empty() ? 0 : static_cast<int64_t>(base.back().size())),
              static_cast<int64_t>(dealt.size()))
        << s.describe();
    EXPECT_EQ(dealer->remainder(), -1);
  }
}

TEST(Dealer, AnIterableShardDealsStreamPositionsAsIterableShardBatches) {
  for (const auto& s : settings()) {
    const IterableShardSpec spec{s.batch_size, s.drop_last, s.processes, s.rank, s.split};
    const auto dealer = make_iterable_dealer(spec);
    std::vector<Batch> one_at_a_time;
    for (const int64_t item : range(s.n)) one_at_a_time.push_back({item});
    const auto dealt = run(*dealer, one_at_a_time);
    EXPECT_EQ(dealt, iterable_shard_batches(range(s.n), spec)) << s.describe();
    EXPECT_EQ(dealer->length(s.n, 0), static_cast<int64_t>(dealt.size())) << s.describe();
  }
}

TEST(Dealer, ADispatchHoldsTheLastStepBackAndDealsAsDispatchBatches) {
  for (const auto& s : settings()) {
    const auto base = make_batches(range(s.n), s.batch_size, s.drop_last);
    const auto dealer = make_dispatch_dealer(DispatchSpec{s.processes, s.rank, s.split, s.drop_last});
    const auto dealt = run(*dealer, base);
    EXPECT_EQ(dealt, dispatch_batches(base, DispatchSpec{s.processes, s.rank, s.split, s.drop_last})) << s.describe();
    EXPECT_EQ(dealer->remainder(), dispatch_remainder(base, s.processes, s.split, s.drop_last)) << s.describe();
    EXPECT_EQ(dealer->length(static_cast<int64_t>(base.size()), 0), static_cast<int64_t>(dealt.size())) << s.describe();
  }
}

TEST(Dealer, APushAfterFinishAndASecondFinishAreRefused) {
  std::vector<std::unique_ptr<Dealer>> dealers;
  dealers.push_back(make_shard_dealer(BaseSampler{2, false}, ShardSpec{2, 0, false, true}));
  dealers.push_back(make_iterable_dealer(IterableShardSpec{2, false, 2, 0, false}));
  dealers.push_back(make_dispatch_dealer(DispatchSpec{2, 0, false, false}));
  for (auto& dealer : dealers) {
    dealer->push({0, 1});
    dealer->finish();
    expect_error(Code::InvalidState, "after finish", [&] { dealer->push({2}); });
    expect_error(Code::InvalidState, "twice", [&] { dealer->finish(); });
  }
}

}  // namespace
}  // namespace accel::data
