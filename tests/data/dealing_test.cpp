// Batch sharding against Accelerate: the conformance vectors of accelerate-semantics.md 1.4, 1.5, 1.9, 1.11
// and 2.5 (plus upstream's even_batches=False vectors), then properties over many settings: coverage and
// padding, equal batch counts with even batches, length == batches yielded, gather_for_metrics totals.
#include "data/dealing.hpp"
#include "data/epoch_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "expect_error.hpp"

namespace accel::data {
namespace {

using Shards = std::vector<std::vector<Batch>>;  // one list of batches per rank

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(i);
  return out;
}

// torch.utils.data.BatchSampler(range(n), batch_size, drop_last)
std::vector<Batch> BS(int64_t n, int64_t batch_size, bool drop_last) {
  return make_batches(range(n), batch_size, drop_last);
}

// The harness of upstream's check_batch_sampler_shards, for any P: every rank's batches, and its length
// (upstream checks the length only without split; accel's length is the real count in every mode).
void check_batch_sampler_shards(int64_t n, int64_t batch_size, bool drop_last, const Shards& expected,
                                bool split_batches = false, bool even_batches = true) {
  const auto num_processes = static_cast<int64_t>(expected.size());
  for (int64_t rank = 0; rank < num_processes; ++rank) {
    SCOPED_TRACE("BS(" + std::to_string(n) + "," + std::to_string(batch_size) + "," + std::to_string(drop_last) +
                 ") rank " + std::to_string(rank));
    const auto& want = expected[static_cast<size_t>(rank)];
    EXPECT_EQ(shard_batches(BS(n, batch_size, drop_last), batch_size, drop_last, num_processes, rank, split_batches,
                            even_batches),
              want);
    EXPECT_EQ(sharded_length(n, batch_size, drop_last, num_processes, rank, split_batches, even_batches),
              static_cast<int64_t>(want.size()));
  }
}

// A batch sampler without batch_size (a plain list of batches): dynamic batch sizes.
void check_dynamic_shards(const std::vector<Batch>& base, bool drop_last, bool even_batches, const Shards& expected) {
  const auto num_processes = static_cast<int64_t>(expected.size());
  const BaseSampler sampler{std::nullopt, drop_last};
  for (int64_t rank = 0; rank < num_processes; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const ShardSpec spec{num_processes, rank, false, even_batches};
    const auto& want = expected[static_cast<size_t>(rank)];
    EXPECT_EQ(shard_batches(base, sampler, spec), want);
    EXPECT_EQ(BatchSamplerShard(sampler, spec).length(static_cast<int64_t>(base.size()), 0),
              static_cast<int64_t>(want.size()));
  }
}

// ---- 1.4 A: split_batches=False, even_batches=True ----

TEST(BatchSamplerShard, NoSplitsVectors) {
  const Shards round{{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                     {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 22, 23}}};
  check_batch_sampler_shards(24, 3, false, round);
  check_batch_sampler_shards(24, 3, true, round);
  check_batch_sampler_shards(
      21, 3, false,
      {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {0, 1, 2}}});
  const Shards three{{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}}};
  check_batch_sampler_shards(21, 3, true, three);
  check_batch_sampler_shards(
      22, 3, false,
      {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 0, 1}}});
  check_batch_sampler_shards(22, 3, true, three);
  check_batch_sampler_shards(
      20, 3, false,
      {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 0}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {1, 2, 3}}});
  check_batch_sampler_shards(20, 3, true, three);
  check_batch_sampler_shards(2, 3, false, {{{0, 1, 0}}, {{1, 0, 1}}});
  check_batch_sampler_shards(2, 3, true, {{}, {}});
}

// ---- 1.4 B: split_batches=True, even_batches=True ----

TEST(BatchSamplerShard, SplitsVectors) {
  const Shards round{{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 21}},
                     {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}, {22, 23}}};
  check_batch_sampler_shards(24, 4, false, round, true);
  check_batch_sampler_shards(24, 4, true, round, true);
  const Shards five{{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}}, {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}}};
  check_batch_sampler_shards(
      22, 4, false,
      {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 21}}, {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}, {0, 1}}},
      true);
  check_batch_sampler_shards(22, 4, true, five, true);
  check_batch_sampler_shards(
      21, 4, false,
      {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 0}}, {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}, {1, 2}}},
      true);
  check_batch_sampler_shards(21, 4, true, five, true);
  check_batch_sampler_shards(2, 4, false, {{{0, 1}}, {{0, 1}}}, true);
  check_batch_sampler_shards(2, 4, true, {{}, {}}, true);
}

// ---- upstream's even_batches=False vectors (tests/test_data_loader.py, not in the reference's table) ----

TEST(BatchSamplerShard, NoSplitsNoEvenVectors) {
  const Shards round{{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                     {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 22, 23}}};
  check_batch_sampler_shards(24, 3, false, round, false, false);
  check_batch_sampler_shards(24, 3, true, round, false, false);
  const Shards three{{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}}};
  check_batch_sampler_shards(
      21, 3, false, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}}}, false,
      false);
  check_batch_sampler_shards(21, 3, true, three, false, false);
  check_batch_sampler_shards(
      22, 3, false, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21}}},
      false, false);
  check_batch_sampler_shards(22, 3, true, three, false, false);
  check_batch_sampler_shards(20, 3, false,
                             {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}}},
                             false, false);
  check_batch_sampler_shards(20, 3, true, three, false, false);
  check_batch_sampler_shards(2, 3, false, {{{0, 1}}, {}}, false, false);
  check_batch_sampler_shards(2, 3, true, {{}, {}}, false, false);
}

// Upstream's __len__ says 6 for both ranks whenever a batch is missing here; accel reports the real count.
TEST(BatchSamplerShard, SplitsNoEvenVectors) {
  const Shards round{{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 21}},
                     {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}, {22, 23}}};
  check_batch_sampler_shards(24, 4, false, round, true, false);
  check_batch_sampler_shards(24, 4, true, round, true, false);
  const Shards five{{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}}, {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}}};
  check_batch_sampler_shards(
      22, 4, false,
      {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 21}}, {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}}}, true,
      false);
  check_batch_sampler_shards(22, 4, true, five, true, false);
  check_batch_sampler_shards(
      21, 4, false,
      {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20}}, {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}}}, true,
      false);
  check_batch_sampler_shards(21, 4, true, five, true, false);
  check_batch_sampler_shards(2, 4, false, {{{0, 1}}, {}}, true, false);
  check_batch_sampler_shards(2, 4, true, {{}, {}}, true, false);
}

// ---- 1.4 E: dynamic batch sizes ----

const std::vector<Batch> kFiveVarying{{0, 1, 2}, {3, 4}, {5, 6, 7, 8}, {9, 10, 11}, {12, 13}};

TEST(BatchSamplerShard, VaryingBatchSizeNoEven) {
  check_dynamic_shards(kFiveVarying, false, false, {{{0, 1, 2}, {5, 6, 7, 8}, {12, 13}}, {{3, 4}, {9, 10, 11}}});
}

TEST(BatchSamplerShard, VaryingBatchSizeEvenBatches) {
  check_dynamic_shards({{0, 1, 2}, {3, 4}, {5, 6, 7, 8}, {9, 10, 11}}, false, true,
                       {{{0, 1, 2}, {5, 6, 7, 8}}, {{3, 4}, {9, 10, 11}}});
  check_dynamic_shards(kFiveVarying, false, true,
                       {{{0, 1, 2}, {5, 6, 7, 8}, {12, 13}}, {{3, 4}, {9, 10, 11}, {0, 1, 2}}});
  check_dynamic_shards({{0, 1, 2}}, false, true, {{{0, 1, 2}}, {{0, 1, 2}}});
  check_dynamic_shards({{0, 1, 2}}, false, true, {{{0, 1, 2}}, {{0, 1, 2}}, {{0, 1, 2}}});
  // The wrapper object with drop_last=True.
  check_dynamic_shards(kFiveVarying, true, true, {{{0, 1, 2}, {5, 6, 7, 8}}, {{3, 4}, {9, 10, 11}}});
}

TEST(BatchSamplerShard, VaryingBatchSizeManyProcesses) {
  check_dynamic_shards({{0}, {1, 2}, {3, 4, 5}, {6}, {7, 8}, {9, 10, 11}}, false, true,
                       {{{0}, {6}}, {{1, 2}, {7, 8}}, {{3, 4, 5}, {9, 10, 11}}});
  check_dynamic_shards({{0}, {1, 2}, {3, 4, 5}, {6}, {7, 8}, {9, 10, 11}, {12, 13}}, false, true,
                       {{{0}, {6}, {12, 13}}, {{1, 2}, {7, 8}, {0}}, {{3, 4, 5}, {9, 10, 11}, {1, 2}}});
}

// Returns the message of the InvalidArgument error `call` throws, or fails.
template <class Call>
std::string invalid_argument_message(Call call) {
  try {
    call();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::InvalidArgument);
    return error.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

TEST(BatchSamplerShard, SplitNeedsARoundMultipleBatchSize) {
  const auto dynamic = invalid_argument_message([] {
    BatchSamplerShard(BaseSampler{std::nullopt, false}, ShardSpec{2, 0, true, true});
  });
  EXPECT_NE(dynamic.find("split_batches"), std::string::npos) << dynamic;
  const auto odd = invalid_argument_message([] {
    BatchSamplerShard(BaseSampler{3, false}, ShardSpec{2, 0, true, true});
  });
  EXPECT_NE(odd.find("round multiple"), std::string::npos) << odd;
  const auto loader = invalid_argument_message([] { validate_sharding(3, 2, true); });
  EXPECT_NE(loader.find("round multiple"), std::string::npos) << loader;
}

TEST(BatchSamplerShard, RejectsImpossibleSettings) {
  invalid_argument_message([] { BatchSamplerShard(BaseSampler{3, false}, ShardSpec{0, 0, false, true}); });
  invalid_argument_message([] { BatchSamplerShard(BaseSampler{3, false}, ShardSpec{2, 2, false, true}); });
  invalid_argument_message([] { BatchSamplerShard(BaseSampler{3, false}, ShardSpec{2, -1, false, true}); });
  invalid_argument_message([] { BatchSamplerShard(BaseSampler{0, false}, ShardSpec{2, 0, false, true}); });
  invalid_argument_message([] { BatchSamplerShard(BaseSampler{INT64_MAX / 2, false}, ShardSpec{3, 0, false, true}); });
  invalid_argument_message([] { BatchSamplerShard(BaseSampler{2, false}, ShardSpec{}).push({1, 2, 3}); });
  invalid_argument_message([] { BatchSamplerShard(BaseSampler{3, true}, ShardSpec{2, 0, true, true}).length(4, 2); });
  invalid_argument_message([] { make_batches(range(4), 0, false); });
  invalid_argument_message([] { num_batches(-1, 2, false); });
}

TEST(BatchesOfSizes, CutsTheIndicesInOrder) {
  const int64_t indices[] = {4, 5, 6, 7, 8};
  const size_t sizes[] = {2, 0, 3};
  EXPECT_EQ(batches_of_sizes(indices, sizes, 3), std::vector<Batch>({{4, 5}, {}, {6, 7, 8}}));
  EXPECT_TRUE(batches_of_sizes(nullptr, nullptr, 0).empty());
  const size_t empty_sizes[] = {0};
  EXPECT_EQ(batches_of_sizes(nullptr, empty_sizes, 1), std::vector<Batch>({{}}));
}

// Sizes that wrap around size_t used to cut batches from the wrong place (an "empty batch", or a
// length_error for a batch whose end came before its start).
TEST(BatchesOfSizes, RefusesSizesThatAddUpPastMemory) {
  const int64_t indices[] = {0, 1};
  const size_t wrapping_to_zero[] = {2, SIZE_MAX - 1};
  EXPECT_NE(invalid_argument_message([&] { batches_of_sizes(indices, wrapping_to_zero, 2); }).find("at batch 1"),
            std::string::npos);
  // More indices than the machine's memory holds: refused before allocating (ASan's allocator aborted on
  // the request of a 2^40-row batch, where the plain one threw bad_alloc).
  const size_t halves[] = {size_t{1} << 63, size_t{1} << 63};
  expect_error(Code::OutOfMemory, "add up to more than", [&] { batches_of_sizes(indices, halves, 2); });
  for (const size_t rows : {size_t{1} << 40, std::vector<int64_t>().max_size() + 1}) {
    const size_t too_many[] = {rows};
    expect_error(Code::OutOfMemory, "at batch 0", [&] { batches_of_sizes(indices, too_many, 1); });
  }
  const size_t some[] = {2};
  try {
    batches_of_sizes(nullptr, some, 1);
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::NullArgument);
  }
}

TEST(BatchSamplerShard, PushAfterFinishIsAnError) {
  BatchSamplerShard shard(BaseSampler{2, false}, ShardSpec{});
  shard.finish();
  try {
    shard.push({0, 1});
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::InvalidState);
  }
}

// Lazily: each base batch produces this rank's batch as soon as its round is complete, not at the end.
TEST(BatchSamplerShard, YieldsOnceTheRoundIsComplete) {
  BatchSamplerShard shard(BaseSampler{2, false}, ShardSpec{2, 0, false, true});
  EXPECT_FALSE(shard.push({0, 1}));
  EXPECT_EQ(shard.push({2, 3}), Batch({0, 1}));
  EXPECT_FALSE(shard.push({4, 5}));
  EXPECT_FALSE(shard.push({6}));  // the round closes with a short batch: held back
  EXPECT_EQ(shard.finish(), std::vector<Batch>({{4, 5}}));
}

// ---- torch BatchSampler ----

TEST(MakeBatches, LikeTorchBatchSampler) {
  EXPECT_EQ(BS(7, 3, false), std::vector<Batch>({{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_EQ(BS(7, 3, true), std::vector<Batch>({{0, 1, 2}, {3, 4, 5}}));
  EXPECT_TRUE(BS(0, 3, false).empty());
  EXPECT_EQ(num_batches(7, 3, false), 3);
  EXPECT_EQ(num_batches(7, 3, true), 2);
  EXPECT_EQ(num_batches(2, 3, true), 0);
}

// ---- 1.5 IterableDatasetShard ----

Shards iterable_shards(int64_t n, int64_t batch_size, bool drop_last, int64_t num_processes, bool split_batches) {
  Shards out;
  for (int64_t rank = 0; rank < num_processes; ++rank) {
    out.push_back(iterable_shard_batches(range(n), {batch_size, drop_last, num_processes, rank, split_batches}));
  }
  return out;
}

std::vector<int64_t> flatten(const std::vector<Batch>& batches) {
  std::vector<int64_t> out;
  for (const auto& batch : batches) out.insert(out.end(), batch.begin(), batch.end());
  return out;
}

// Upstream's docstring: [0..7] on two processes.
TEST(IterableDatasetShard, DocstringExample) {
  auto plain = iterable_shards(8, 4, false, 2, false);
  EXPECT_EQ(flatten(plain[0]), Batch({0, 1, 2, 3}));
  EXPECT_EQ(flatten(plain[1]), Batch({4, 5, 6, 7}));
  auto split = iterable_shards(8, 4, false, 2, true);
  EXPECT_EQ(flatten(split[0]), Batch({0, 1, 4, 5}));
  EXPECT_EQ(flatten(split[1]), Batch({2, 3, 6, 7}));
}

// Upstream's check_iterable_dataset_shards over streams of random length (P=2, batch size 4).
void check_iterable_dataset_shards(int64_t n, int64_t batch_size, bool drop_last, int64_t num_processes,
                                   bool split_batches) {
  SCOPED_TRACE("n=" + std::to_string(n) + " drop_last=" + std::to_string(drop_last) +
               " split=" + std::to_string(split_batches));
  const auto shards = iterable_shards(n, batch_size, drop_last, num_processes, split_batches);
  const int64_t shard_batch_size = split_batches ? batch_size / num_processes : batch_size;
  std::vector<std::vector<int64_t>> lists;
  for (const auto& shard : shards) lists.push_back(flatten(shard));
  for (const auto& list : lists) {
    ASSERT_EQ(list.size(), lists[0].size());
    ASSERT_EQ(static_cast<int64_t>(list.size()) % shard_batch_size, 0);
  }
  std::vector<int64_t> observed;
  for (size_t i = 0; i < lists[0].size(); i += static_cast<size_t>(shard_batch_size)) {
    for (const auto& list : lists)
      observed.insert(observed.end(), list.begin() + i, list.begin() + i + shard_batch_size);
  }
  auto reference = range(n);
  if (!drop_last) {
    while (reference.size() < observed.size()) reference.insert(reference.end(), reference.begin(), reference.end());
  }
  ASSERT_LE(observed.size(), reference.size());
  EXPECT_EQ(observed, std::vector<int64_t>(reference.begin(), reference.begin() + observed.size()));
  for (int64_t rank = 0; rank < num_processes; ++rank) {
    const IterableDatasetShard shard({batch_size, drop_last, num_processes, rank, split_batches});
    EXPECT_EQ(shard.length(n), static_cast<int64_t>(shards[static_cast<size_t>(rank)].size()));
    for (const auto& batch : shards[static_cast<size_t>(rank)])
      EXPECT_EQ(static_cast<int64_t>(batch.size()), shard_batch_size);
  }
}

TEST(IterableDatasetShard, RandomLengthStreams) {
  std::mt19937 random(42);
  std::vector<int64_t> lengths{0, 1, 2, 3, 4, 7, 8, 9};
  for (int i = 0; i < 20; ++i) lengths.push_back(std::uniform_int_distribution<int64_t>(1, 1000)(random));
  for (const int64_t n : lengths) {
    for (const bool drop_last : {false, true}) {
      for (const bool split : {false, true}) check_iterable_dataset_shards(n, 4, drop_last, 2, split);
    }
  }
}

TEST(IterableDatasetShard, PadsFromTheFirstGlobalBatch) {
  // 10 items, global batch 4: the last one [8, 9] is completed with [0, 1].
  EXPECT_EQ(iterable_shards(10, 2, false, 2, false), Shards({{{0, 1}, {4, 5}, {8, 9}}, {{2, 3}, {6, 7}, {0, 1}}}));
  // 3 items, global batch 8: the stream repeats itself.
  EXPECT_EQ(iterable_shards(3, 4, false, 2, false), Shards({{{0, 1, 2, 0}}, {{1, 2, 0, 1}}}));
  EXPECT_EQ(iterable_shards(3, 4, true, 2, false), Shards({{}, {}}));
}

TEST(IterableDatasetShard, SplitNeedsARoundMultipleBatchSize) {
  const auto message = invalid_argument_message([] { IterableDatasetShard({6, false, 4, 0, true}); });
  EXPECT_NE(message.find("round multiple"), std::string::npos) << message;
  // Upstream accepts batch size 1 here, but each rank's loader would get batch size 0.
  invalid_argument_message([] { IterableDatasetShard({1, false, 2, 0, true}); });
}

// ---- 1.9 DataLoaderDispatcher ----

Shards dispatch_shards(int64_t n, int64_t batch_size, bool drop_last, int64_t num_processes, bool split_batches) {
  Shards out;
  const auto base = BS(n, batch_size, drop_last);
  for (int64_t rank = 0; rank < num_processes; ++rank) {
    out.push_back(dispatch_batches(base, {num_processes, rank, split_batches, drop_last}));
  }
  return out;
}

TEST(Dispatcher, RankRGetsTheRthBaseBatchWithoutSplit) {
  EXPECT_EQ(dispatch_shards(16, 4, false, 2, false),
            Shards({{{0, 1, 2, 3}, {8, 9, 10, 11}}, {{4, 5, 6, 7}, {12, 13, 14, 15}}}));
}

TEST(Dispatcher, ContiguousSlicesWithSplit) {
  EXPECT_EQ(dispatch_shards(8, 4, false, 2, true), Shards({{{0, 1}, {4, 5}}, {{2, 3}, {6, 7}}}));
}

// The last step is sliced evenly: padding (the first P rows of the first step) only fixes rows % P.
TEST(Dispatcher, LastStepPadding) {
  // 9 samples, batch 5, 2 processes: one step of 9 rows, padded with row 0.
  EXPECT_EQ(dispatch_shards(9, 5, false, 2, false), Shards({{{0, 1, 2, 3, 4}}, {{5, 6, 7, 8, 0}}}));
  EXPECT_EQ(dispatch_remainder(BS(9, 5, false), 2, false, false), 9);
  // Split: steps [0..3], [4..7], [8]; the last one becomes [8, 0].
  EXPECT_EQ(dispatch_shards(9, 4, false, 2, true), Shards({{{0, 1}, {4, 5}, {8}}, {{2, 3}, {6, 7}, {0}}}));
  EXPECT_EQ(dispatch_remainder(BS(9, 4, false), 2, true, false), 1);
  // A last step whose rows divide evenly is just smaller.
  EXPECT_EQ(dispatch_shards(10, 2, false, 2, false), Shards({{{0, 1}, {4, 5}, {8}}, {{2, 3}, {6, 7}, {9}}}));
  // Three processes, 10 samples, batch 2: the last step [6..9] (2 base batches) gets 2 rows of padding.
  EXPECT_EQ(dispatch_shards(10, 2, false, 3, false), Shards({{{0, 1}, {6, 7}}, {{2, 3}, {8, 9}}, {{4, 5}, {0, 1}}}));
}

TEST(Dispatcher, DropLastDropsThePartialStep) {
  EXPECT_EQ(dispatch_shards(10, 2, true, 2, false), Shards({{{0, 1}, {4, 5}}, {{2, 3}, {6, 7}}}));
  EXPECT_EQ(dispatch_remainder(BS(10, 2, true), 2, false, true), 4);
  EXPECT_EQ(dispatch_shards(9, 4, true, 2, true), Shards({{{0, 1}, {4, 5}}, {{2, 3}, {6, 7}}}));
}

// A dataset smaller than P: the padding source is shorter than P rows and the last ranks get nothing.
TEST(Dispatcher, TinyDataset) { EXPECT_EQ(dispatch_shards(1, 1, false, 3, false), Shards({{{0}}, {{0}}, {{}}})); }

TEST(Dispatcher, LazySlicingKeepsTheRemainder) {
  BatchDispatcher dispatcher(2, 1, false);
  EXPECT_EQ(dispatcher.slice({0, 1, 2, 3}, false), Batch({2, 3}));
  EXPECT_EQ(dispatcher.remainder(), -1);
  EXPECT_EQ(dispatcher.slice({4, 5, 6}, true), Batch({6, 0}));
  EXPECT_EQ(dispatcher.remainder(), 3);
}

// ---- 1.11 skip_first_batches ----

TEST(SkipFirstBatches, Vectors) {
  const std::vector<Batch> want{{8, 9, 10, 11}, {12, 13, 14, 15}};
  EXPECT_EQ(skip_first_batches(BS(16, 4, false), 2), want);  // SkipBatchSampler(BS(16,4,False), 2)
  // skip_first_batches(DataLoader(list(range(16)), batch_size=4), 2), as a prepared loader on one process.
  PlanOptions options;
  options.dataset_len = 16;
  options.batch_size = 4;
  options.skip_batches = 2;
  for (const bool dispatch : {false, true}) {
    options.dispatch_batches = dispatch;
    const auto plan = plan_epoch(options);
    EXPECT_EQ(plan.ranks.at(0).batches, want);
    EXPECT_EQ(plan.ranks.at(0).length, 2);
  }
  EXPECT_TRUE(skip_first_batches(BS(16, 4, false), 9).empty());
  invalid_argument_message([] { skip_first_batches({}, -1); });
}

// A dispatcher skips this rank's first batches, which are steps, map-style or iterable alike: the loader's rule
// (Accelerate's map-style dispatcher skipped base batches, shifting the grouping into steps).
TEST(SkipFirstBatches, DispatcherSkipsStepsAsTheLoaderDoes) {
  PlanOptions options;
  options.dataset_len = 16;
  options.batch_size = 2;
  options.num_processes = 2;
  options.dispatch_batches = true;
  options.skip_batches = 1;
  auto plan = plan_epoch(options);
  // Steps [0..3], [4..7], [8..11], [12..15]: the first is skipped.
  EXPECT_EQ(plan.ranks[0].batches, std::vector<Batch>({{4, 5}, {8, 9}, {12, 13}}));
  EXPECT_EQ(plan.ranks[1].batches, std::vector<Batch>({{6, 7}, {10, 11}, {14, 15}}));
  EXPECT_EQ(plan.ranks[1].length, 3);
  EXPECT_EQ(plan.remainder, 4);
  options.iterable = true;
  plan = plan_epoch(options);
  EXPECT_EQ(plan.ranks[0].batches, std::vector<Batch>({{4, 5}, {8, 9}, {12, 13}}));
  EXPECT_EQ(plan.ranks[1].length, 3);
}

// ---- plan_epoch ----

TEST(PlanEpoch, IterableDatasetsAreDispatchedByDefault) {
  PlanOptions options;
  options.dataset_len = 10;
  options.batch_size = 2;
  options.num_processes = 2;
  options.iterable = true;
  const auto by_default = plan_epoch(options);
  options.dispatch_batches = true;
  EXPECT_EQ(plan_epoch(options).ranks[1].batches, by_default.ranks[1].batches);
  EXPECT_EQ(by_default.ranks[1].batches, std::vector<Batch>({{2, 3}, {6, 7}, {9}}));
  EXPECT_EQ(by_default.remainder, 2);
  options.dispatch_batches = false;
  const auto sharded = plan_epoch(options);
  EXPECT_EQ(sharded.ranks[1].batches, std::vector<Batch>({{2, 3}, {6, 7}, {0, 1}}));
  EXPECT_EQ(sharded.remainder, 0);
}

TEST(PlanEpoch, RejectsImpossibleSettings) {
  const auto plan_with = [](int64_t n, int64_t batch_size, int64_t processes, bool split, int64_t skip) {
    PlanOptions options;
    options.dataset_len = n;
    options.batch_size = batch_size;
    options.num_processes = processes;
    options.split_batches = split;
    options.skip_batches = skip;
    return [options] { plan_epoch(options); };
  };
  EXPECT_NE(invalid_argument_message(plan_with(-1, 2, 2, false, 0)).find("negative"), std::string::npos);
  EXPECT_NE(invalid_argument_message(plan_with(4, 0, 2, false, 0)).find("batch_size"), std::string::npos);
  EXPECT_NE(invalid_argument_message(plan_with(4, 2, 0, false, 0)).find("num_processes"), std::string::npos);
  EXPECT_NE(invalid_argument_message(plan_with(4, 3, 2, true, 0)).find("round multiple"), std::string::npos);
  EXPECT_NE(invalid_argument_message(plan_with(4, 2, 2, false, -1)).find("skip"), std::string::npos);
}

// A plan holds every index and each rank walks the epoch: sizes it cannot hold are refused up front (the
// largest dataset length used to end in std::length_error, an abort of accel shard-plan).
TEST(PlanEpoch, RefusesPlansTooLargeToCompute) {
  const auto plan_with = [](int64_t n, int64_t batch_size, int64_t processes) {
    PlanOptions options;
    options.dataset_len = n;
    options.batch_size = batch_size;
    options.num_processes = processes;
    return [options] { plan_epoch(options); };
  };
  EXPECT_NE(invalid_argument_message(plan_with(INT64_MAX, 2, 3)).find("more than 9223372036854775807"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message(plan_with(1, INT64_MAX, 1)).find("too large"), std::string::npos);
  EXPECT_NE(invalid_argument_message(plan_with(kMaxPlanWork / 2, 1, 2)).find("is 10000004"), std::string::npos);
  EXPECT_EQ(plan_epoch(PlanOptions{kMaxPlanWork / 100 - 4, 1, 2}).ranks.size(), 2u);
}

TEST(PlanEpoch, EmptyDatasetYieldsNothing) {
  for (const bool iterable : {false, true}) {
    for (const bool dispatch : {false, true}) {
      PlanOptions options;
      options.batch_size = 3;
      options.num_processes = 2;
      options.iterable = iterable;
      options.dispatch_batches = dispatch;
      for (const auto& rank : plan_epoch(options).ranks) {
        EXPECT_TRUE(rank.batches.empty());
        EXPECT_EQ(rank.length, 0);
      }
    }
  }
}

// ---- properties over many settings ----

enum class Mode { MapShard, IterableShard, Dispatch };

struct Setting {
  int64_t n, batch_size, processes;
  bool split, even, drop_last;
  Mode mode;

  std::string name() const {
    return "n=" + std::to_string(n) + " b=" + std::to_string(batch_size) + " p=" + std::to_string(processes) +
           " split=" + std::to_string(split) + " even=" + std::to_string(even) +
           " drop_last=" + std::to_string(drop_last) + " mode=" + std::to_string(static_cast<int>(mode));
  }

  EpochPlan plan() const {
    PlanOptions options;
    options.dataset_len = n;
    options.batch_size = batch_size;
    options.num_processes = processes;
    options.split_batches = split;
    options.even_batches = even;
    options.drop_last = drop_last;
    options.iterable = mode == Mode::IterableShard;
    options.dispatch_batches = mode == Mode::Dispatch;
    return plan_epoch(options);
  }

  // Whether every rank yields the same number of batches.
  bool balanced() const { return mode != Mode::MapShard || even; }

  // How many real samples an epoch covers (a prefix of the dataset when drop_last drops some).
  int64_t covered() const {
    if (!drop_last) return n;
    if (mode == Mode::IterableShard || split) return n / global_batch() * global_batch();
    return n / batch_size / processes * global_batch();  // whole rounds of P full base batches
  }

  // Padding repeats the start of the dataset: the first global batch for the shards (the whole dataset when
  // it is smaller); for the dispatcher at most P - 1 rows, so the period never shows.
  int64_t padding_period() const { return mode == Mode::Dispatch ? n : std::min(n, global_batch()); }

  int64_t global_batch() const { return split ? batch_size : batch_size * processes; }
};

std::vector<Setting> all_settings() {
  std::vector<Setting> out;
  for (int64_t n = 0; n <= 26; ++n) {
    for (int64_t batch_size = 1; batch_size <= 6; ++batch_size) {
      for (int64_t processes = 1; processes <= 4; ++processes) {
        for (const bool split : {false, true}) {
          if (split && batch_size % processes != 0) continue;
          for (const bool even : {true, false}) {
            for (const bool drop_last : {false, true}) {
              for (const Mode mode : {Mode::MapShard, Mode::IterableShard, Mode::Dispatch}) {
                out.push_back({n, batch_size, processes, split, even, drop_last, mode});
              }
            }
          }
        }
      }
    }
  }
  return out;
}

// Batches in the order the samples were read: step by step, rank by rank (a rank without a batch at a step
// is passed over).
std::vector<int64_t> global_order(const EpochPlan& plan) {
  size_t steps = 0;
  for (const auto& rank : plan.ranks) steps = std::max(steps, rank.batches.size());
  std::vector<int64_t> out;
  for (size_t step = 0; step < steps; ++step) {
    for (const auto& rank : plan.ranks) {
      if (step < rank.batches.size()) out.insert(out.end(), rank.batches[step].begin(), rank.batches[step].end());
    }
  }
  return out;
}

TEST(Properties, LengthIsTheNumberOfBatchesYielded) {
  for (const auto& setting : all_settings()) {
    SCOPED_TRACE(setting.name());
    for (const auto& rank : setting.plan().ranks) {
      ASSERT_EQ(rank.length, static_cast<int64_t>(rank.batches.size())) << "rank " << rank.rank;
    }
  }
}

TEST(Properties, EvenBatchesGiveEveryRankTheSameCount) {
  for (const auto& setting : all_settings()) {
    if (!setting.balanced()) continue;
    SCOPED_TRACE(setting.name());
    const auto plan = setting.plan();
    for (const auto& rank : plan.ranks) ASSERT_EQ(rank.batches.size(), plan.ranks[0].batches.size());
  }
}

// Every sample is read once, in order, and anything after it is padding that repeats the dataset's start.
TEST(Properties, CoverEveryIndexThenPadFromTheStart) {
  for (const auto& setting : all_settings()) {
    SCOPED_TRACE(setting.name());
    const auto order = global_order(setting.plan());
    const int64_t covered = setting.covered();
    ASSERT_GE(static_cast<int64_t>(order.size()), covered);
    for (int64_t i = 0; i < covered; ++i) ASSERT_EQ(order[static_cast<size_t>(i)], i);
    const int64_t padding = static_cast<int64_t>(order.size()) - covered;
    if (setting.drop_last || (setting.mode == Mode::MapShard && !setting.even)) {
      ASSERT_EQ(padding, 0);
      continue;
    }
    for (int64_t k = 0; k < padding; ++k) {
      ASSERT_EQ(order[static_cast<size_t>(covered + k)], k % setting.padding_period()) << "padding " << k;
    }
    // Padding never fills a whole global batch (or, for the dispatcher, P rows).
    ASSERT_LT(padding, setting.mode == Mode::Dispatch ? setting.processes : setting.global_batch());
  }
}

TEST(Properties, BatchesHaveTheLoaderBatchSizeWhenEven) {
  for (const auto& setting : all_settings()) {
    if (setting.mode == Mode::Dispatch || !setting.balanced()) continue;  // the dispatcher's last step may be smaller
    if (setting.processes == 1) continue;  // one process shards nothing: its last batch is the dataset's rest
    SCOPED_TRACE(setting.name());
    const int64_t size = setting.split ? setting.batch_size / setting.processes : setting.batch_size;
    for (const auto& rank : setting.plan().ranks) {
      for (const auto& batch : rank.batches) ASSERT_EQ(static_cast<int64_t>(batch.size()), size);
    }
  }
}

// ---- 2.5 gather_for_metrics ----

// What gather_for_metrics collects over an epoch: each step's batches gathered in rank order, the last
// step's truncated to the remainder when it is positive.
std::vector<int64_t> gather_for_metrics(const EpochPlan& plan) {
  std::vector<int64_t> out;
  const size_t steps = plan.ranks.at(0).batches.size();
  for (size_t step = 0; step < steps; ++step) {
    std::vector<int64_t> gathered;
    for (const auto& rank : plan.ranks) {
      gathered.insert(gathered.end(), rank.batches.at(step).begin(), rank.batches.at(step).end());
    }
    if (step + 1 == steps && plan.remainder > 0 && static_cast<int64_t>(gathered.size()) > plan.remainder) {
      gathered.resize(static_cast<size_t>(plan.remainder));
    }
    out.insert(out.end(), gathered.begin(), gathered.end());
  }
  return out;
}

EpochPlan metrics_plan(int64_t n, int64_t batch_size, int64_t processes, bool split, bool dispatch,
                       bool iterable = false) {
  PlanOptions options;
  options.dataset_len = n;
  options.batch_size = batch_size;
  options.num_processes = processes;
  options.split_batches = split;
  options.iterable = iterable;
  options.dispatch_batches = dispatch;
  return plan_epoch(options);
}

TEST(GatherForMetrics, DocstringNineSamples) {
  for (const bool dispatch : {false, true}) {
    const auto plan = metrics_plan(9, 5, 2, false, dispatch);
    EXPECT_EQ(plan.remainder, 9);
    EXPECT_EQ(gather_for_metrics(plan), range(9));
  }
}

TEST(GatherForMetrics, TotalsMatchTheDataset) {
  for (const int64_t n : {99, 512}) {
    for (int64_t batch_size = 1; batch_size <= 17; ++batch_size) {
      for (int64_t processes = 1; processes <= 5; ++processes) {
        for (const bool split : {false, true}) {
          if (split && batch_size % processes != 0) continue;
          for (const bool dispatch : {false, true}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " b=" + std::to_string(batch_size) +
                         " p=" + std::to_string(processes) + " split=" + std::to_string(split) +
                         " dispatch=" + std::to_string(dispatch));
            EXPECT_EQ(gather_for_metrics(metrics_plan(n, batch_size, processes, split, dispatch)), range(n));
          }
        }
      }
    }
  }
}

TEST(GatherForMetrics, IterableDatasetIsDispatchedAndExact) {
  for (int64_t processes = 1; processes <= 4; ++processes) {
    const auto plan = metrics_plan(30, 4, processes, false, true, true);
    EXPECT_EQ(gather_for_metrics(plan), range(30));
  }
}

// Not dispatched, an iterable shard reports remainder 0: upstream keeps the duplicates.
TEST(GatherForMetrics, IterableShardKeepsPadding) {
  const auto plan = metrics_plan(30, 4, 2, false, false, true);
  EXPECT_EQ(plan.remainder, 0);
  EXPECT_EQ(gather_for_metrics(plan).size(), 32u);
}

TEST(GatherForMetrics, DropLast) {
  for (int64_t processes = 1; processes <= 4; ++processes) {
    PlanOptions options;
    options.dataset_len = 10 * processes + 1;
    options.batch_size = 5;
    options.num_processes = processes;
    options.drop_last = true;
    const auto plan = plan_epoch(options);
    EXPECT_EQ(plan.remainder, -1);
    const auto gathered = gather_for_metrics(plan);
    ASSERT_EQ(gathered.size(), static_cast<size_t>(10 * processes));  // two steps, nothing trimmed
    EXPECT_EQ(gathered, range(10 * processes));
  }
}

TEST(GatherForMetrics, ShardRemainder) {
  EXPECT_EQ(shard_remainder(9, 5, 2, false, false), 9);
  EXPECT_EQ(shard_remainder(9, 4, 2, true, false), 1);
  EXPECT_EQ(shard_remainder(24, 3, 2, false, false), 0);
  EXPECT_EQ(shard_remainder(9, 5, 2, false, true), -1);
}

// Upstream's distributed check: with length 32*P and batch size 8, concatenating the gathered batches gives
// arange(length), with and without split_batches.
TEST(GatherForMetrics, DataLoaderPreparationCheck) {
  for (int64_t processes = 1; processes <= 4; ++processes) {
    for (const bool split : {false, true}) {
      if (split && 8 % processes != 0) continue;
      for (const bool dispatch : {false, true}) {
        EXPECT_EQ(gather_for_metrics(metrics_plan(32 * processes, 8, processes, split, dispatch)),
                  range(32 * processes));
      }
    }
  }
}

}  // namespace
}  // namespace accel::data
