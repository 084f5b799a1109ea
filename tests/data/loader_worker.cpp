// Prepared loaders on every rank under `accel launch` (2 and 3 processes): what each rank yields, put
// back together with gather / gather_for_metrics, must be the dataset exactly as Accelerate would give it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "worker.hpp"

namespace {

// The loader's length, failing the test when it cannot be read.
int64_t length_of(const accel_loader_t* loader) {
  int64_t length = -2;
  EXPECT_EQ(accel_loader_length(loader, &length), ACCEL_OK) << accel_error_last();
  return length;
}

using namespace worker;

struct LoaderSettings {
  const char* dispatch = "auto";
  int64_t batch_size = 4;
  bool shuffle = false;
  bool split_batches = false;
  bool drop_last = false;
  int64_t data_seed = -1;
  bool seedable = false;
  int64_t prefetch_threads = 0;
  bool already_sharded = false;
};

// A dataset whose only tensor is the sample index, so batches show which samples they hold.
accel_dataset_t* index_dataset(int64_t n) {
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::iota(indices.begin(), indices.end(), 0);
  const int64_t shape[] = {n};
  accel_tensor_t* tensor = nullptr;
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, indices.data(), ACCEL_DTYPE_INT64, shape, 1), ACCEL_OK);
  const char* names[] = {"index"};
  accel_dataset_t* dataset = nullptr;
  EXPECT_EQ(accel_dataset_from_tensors(&dataset, names, &tensor, 1), ACCEL_OK) << accel_error_last();
  accel_tensor_free(tensor);
  return dataset;
}

// The stream offset, offset + 1, ..., offset + n-1 of 0-d int64 items, restarted each epoch.
struct Stream {
  int64_t n = 0;
  int64_t next = 0;
  int64_t offset = 0;
};

int start_stream(int64_t, void* payload) {
  static_cast<Stream*>(payload)->next = 0;
  return 0;
}

int next_in_stream(accel_sample_t* sample, int* end, void* payload) {
  auto* stream = static_cast<Stream*>(payload);
  if (stream->next >= stream->n) {
    *end = 1;
    return 0;
  }
  const int64_t value = stream->offset + stream->next++;
  accel_tensor_t* tensor = nullptr;
  if (accel_tensor_from_buffer(&tensor, &value, ACCEL_DTYPE_INT64, nullptr, 0) != ACCEL_OK) return 1;
  const int code = accel_sample_add(sample, "index", tensor);
  accel_tensor_free(tensor);
  return code;
}

accel_loader_t* loader_over(accel_dataset_t* dataset, const LoaderSettings& settings) {
  accel_options_t* options = nullptr;
  EXPECT_EQ(accel_options_new(&options), ACCEL_OK);
  EXPECT_EQ(accel_options_set_int(options, "batch_size", settings.batch_size), ACCEL_OK);
  EXPECT_EQ(accel_options_set_bool(options, "shuffle", settings.shuffle), ACCEL_OK);
  EXPECT_EQ(accel_options_set_bool(options, "split_batches", settings.split_batches), ACCEL_OK);
  EXPECT_EQ(accel_options_set_bool(options, "drop_last", settings.drop_last), ACCEL_OK);
  EXPECT_EQ(accel_options_set_int(options, "data_seed", settings.data_seed), ACCEL_OK);
  EXPECT_EQ(accel_options_set_bool(options, "use_seedable_sampler", settings.seedable), ACCEL_OK);
  EXPECT_EQ(accel_options_set_string(options, "dispatch_batches", settings.dispatch), ACCEL_OK);
  EXPECT_EQ(accel_options_set_int(options, "prefetch_threads", settings.prefetch_threads), ACCEL_OK);
  EXPECT_EQ(accel_options_set_bool(options, "already_sharded", settings.already_sharded), ACCEL_OK);
  accel_loader_t* loader = nullptr;
  EXPECT_EQ(accel_loader_new(&loader, state, dataset, options), ACCEL_OK) << accel_error_last();
  accel_options_free(options);
  return loader;
}

accel_loader_t* make_loader(int64_t n, const LoaderSettings& settings) {
  accel_dataset_t* dataset = index_dataset(n);
  accel_loader_t* loader = loader_over(dataset, settings);
  accel_dataset_free(dataset);
  return loader;
}

accel_loader_t* make_stream_loader(Stream* stream, const LoaderSettings& settings) {
  accel_dataset_t* dataset = nullptr;
  EXPECT_EQ(accel_dataset_from_iterable(&dataset, start_stream, next_in_stream, stream), ACCEL_OK);
  accel_loader_t* loader = loader_over(dataset, settings);
  accel_dataset_free(dataset);
  return loader;
}

struct Epoch {
  std::vector<std::vector<int64_t>> local;  // this rank's batches
  std::vector<int64_t> gathered;            // gather_for_metrics of every batch, concatenated
  std::vector<int> end_flags;
};

// Runs the rest of the current epoch (or a whole one), gathering each batch for metrics.
Epoch run_epoch(accel_loader_t* loader, int64_t max_batches = -1) {
  Epoch epoch;
  for (int64_t taken = 0; max_batches < 0 || taken < max_batches; ++taken) {
    accel_batch_t* batch = nullptr;
    EXPECT_EQ(accel_loader_next(loader, &batch), ACCEL_OK) << accel_error_last();
    if (batch == nullptr) break;
    accel_tensor_t *indices = nullptr, *all = nullptr;
    EXPECT_EQ(accel_batch_get(batch, "index", &indices), ACCEL_OK);
    epoch.local.push_back(long_values(indices));
    epoch.end_flags.push_back(accel_loader_end_of_dataloader(loader));
    EXPECT_EQ(accel_state_gather_for_metrics(state, indices, &all), ACCEL_OK) << accel_error_last();
    const auto values = long_values(all);
    epoch.gathered.insert(epoch.gathered.end(), values.begin(), values.end());
    accel_tensor_free(all);
    accel_tensor_free(indices);
    accel_batch_free(batch);
  }
  return epoch;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> values(static_cast<size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

std::vector<int64_t> sorted(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

TEST(Loader, SequentialEpochGathersToTheDatasetWithAndWithoutSplit) {
  for (bool split : {false, true}) {
    LoaderSettings settings;
    settings.split_batches = split;
    settings.batch_size = split ? 2 * world : 4;
    accel_loader_t* loader = make_loader(50, settings);
    const auto epoch = run_epoch(loader);
    EXPECT_EQ(epoch.gathered, iota(50)) << "split " << split;
    EXPECT_EQ(static_cast<int64_t>(epoch.local.size()), length_of(loader));
    accel_loader_free(loader);
  }
}

TEST(Loader, EndOfDataloaderIsTrueExactlyOnTheLastBatch) {
  accel_loader_t* loader = make_loader(16 * world, LoaderSettings{});
  for (int pass = 0; pass < 2; ++pass) {
    const auto epoch = run_epoch(loader);
    ASSERT_EQ(epoch.end_flags.size(), 4u);
    EXPECT_EQ(epoch.end_flags, (std::vector<int>{0, 0, 0, 1}));
  }
  EXPECT_EQ(accel_loader_epoch(loader), 2);
  accel_loader_free(loader);
}

TEST(Loader, ShuffledEpochsArePermutationsSharedByAllRanks) {
  LoaderSettings settings;
  settings.shuffle = true;
  accel_loader_t* loader = make_loader(37, settings);
  const auto first = run_epoch(loader);
  const auto second = run_epoch(loader);
  EXPECT_EQ(sorted(first.gathered), iota(37));
  EXPECT_EQ(sorted(second.gathered), iota(37));
  EXPECT_NE(first.gathered, second.gathered);
  EXPECT_NE(first.gathered, iota(37));
  accel_loader_free(loader);
}

TEST(Loader, TheSameSeedRepeatsTheOrder) {
  for (bool seedable : {false, true}) {
    LoaderSettings settings;
    settings.shuffle = true;
    settings.data_seed = 1234;
    settings.seedable = seedable;
    accel_loader_t* a = make_loader(40, settings);
    accel_loader_t* b = make_loader(40, settings);
    const auto from_a = run_epoch(a);
    const auto from_b = run_epoch(b);
    EXPECT_EQ(from_a.gathered, from_b.gathered);
    EXPECT_EQ(sorted(from_a.gathered), iota(40));
    accel_loader_free(a);
    accel_loader_free(b);
  }
}

TEST(Loader, GatherForMetricsDropsThePadding) {
  struct Case {
    int64_t samples, batch_size;
    bool split;
  };
  for (const Case& c : {Case{9, 5, false}, Case{99, 4, false}, Case{99, 4 * world, true}, Case{512, 4, false},
                        Case{512, 4 * world, true}}) {
    LoaderSettings settings;
    settings.batch_size = c.batch_size;
    settings.split_batches = c.split;
    accel_loader_t* loader = make_loader(c.samples, settings);
    const auto epoch = run_epoch(loader);
    EXPECT_EQ(static_cast<int64_t>(epoch.gathered.size()), c.samples) << c.samples << " split " << c.split;
    EXPECT_EQ(sorted(epoch.gathered), iota(c.samples));
    accel_loader_free(loader);
  }
}

TEST(Loader, ResumedMidEpochYieldsExactlyTheRemainingBatches) {
  LoaderSettings settings;
  settings.shuffle = true;
  accel_loader_t* original = make_loader(60, settings);
  run_epoch(original);
  run_epoch(original, 3);
  const void* data = nullptr;
  size_t size = 0;
  ASSERT_EQ(accel_loader_save_state(original, &data, &size), ACCEL_OK) << accel_error_last();
  const std::string saved(static_cast<const char*>(data), size);
  const auto expected = run_epoch(original);
  accel_loader_free(original);

  accel_loader_t* resumed = make_loader(60, settings);
  ASSERT_EQ(accel_loader_load_state(resumed, saved.data(), saved.size()), ACCEL_OK) << accel_error_last();
  EXPECT_EQ(accel_loader_epoch(resumed), 1);
  const auto rest = run_epoch(resumed);
  EXPECT_EQ(rest.local, expected.local);
  EXPECT_FALSE(rest.local.empty());
  EXPECT_EQ(accel_loader_epoch(resumed), 2);
  accel_loader_free(resumed);
}

TEST(Loader, DispatchedMapStyleBatchesMatchTheShardedOnes) {
  for (bool split : {false, true}) {
    for (int64_t samples : {int64_t{99}, int64_t{512}, int64_t{9}}) {
      LoaderSettings settings;
      settings.split_batches = split;
      settings.batch_size = split ? 2 * world : 5;
      settings.dispatch = "true";
      accel_loader_t* dispatched = make_loader(samples, settings);
      const auto from_dispatch = run_epoch(dispatched);
      EXPECT_EQ(from_dispatch.gathered, iota(samples)) << samples << " split " << split;
      EXPECT_EQ(static_cast<int64_t>(from_dispatch.local.size()), length_of(dispatched));
      EXPECT_EQ(from_dispatch.end_flags.back(), 1);
      settings.dispatch = "false";
      accel_loader_t* sharded = make_loader(samples, settings);
      EXPECT_EQ(sorted(run_epoch(sharded).gathered), sorted(from_dispatch.gathered));
      accel_loader_free(dispatched);
      accel_loader_free(sharded);
    }
  }
}

TEST(Loader, ShuffledDispatchIsAPermutation) {
  LoaderSettings settings;
  settings.shuffle = true;
  settings.dispatch = "true";
  accel_loader_t* loader = make_loader(45, settings);
  EXPECT_EQ(sorted(run_epoch(loader).gathered), iota(45));
  accel_loader_free(loader);
}

TEST(Loader, IterableDatasetsDispatchByDefaultAndGatherEveryItemOnce) {
  for (int64_t items : {int64_t{30}, int64_t{99}}) {
    Stream stream{items, 0};
    accel_loader_t* loader = make_stream_loader(&stream, LoaderSettings{});
    EXPECT_EQ(length_of(loader), -1);
    for (int pass = 0; pass < 2; ++pass) {
      const auto epoch = run_epoch(loader);
      EXPECT_EQ(epoch.gathered, iota(items)) << items << " pass " << pass;
      EXPECT_EQ(epoch.end_flags.back(), 1);
    }
    accel_loader_free(loader);
  }
}

TEST(Loader, ShardedIterableDatasetsCoverTheStream) {
  for (bool split : {false, true}) {
    Stream stream{50, 0};
    LoaderSettings settings;
    settings.dispatch = "false";
    settings.split_batches = split;
    settings.batch_size = split ? 2 * world : 4;
    accel_loader_t* loader = make_stream_loader(&stream, settings);
    const auto epoch = run_epoch(loader);
    auto unique = sorted(epoch.gathered);
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    EXPECT_EQ(unique, iota(50)) << "split " << split;
    EXPECT_EQ(epoch.end_flags.back(), 1);
    accel_loader_free(loader);
  }
}

// Each rank's stream reads only its own shard (rank r: 1000 r, 1000 r + 1, ...). Declared already_sharded,
// every rank batches its whole stream, in order, and gather_for_metrics sees every item of every shard
// once; the streams may differ in length, each rank then yielding its own number of batches.
TEST(Loader, AlreadyShardedIterableDatasetsAreReadByEachRankWhole) {
  for (bool split : {false, true}) {
    Stream stream{10, 0, 1000 * rank};
    LoaderSettings settings;
    settings.already_sharded = true;
    settings.split_batches = split;
    settings.batch_size = split ? 4 * world : 4;
    accel_loader_t* loader = make_stream_loader(&stream, settings);
    const auto epoch = run_epoch(loader);
    const std::vector<std::vector<int64_t>> mine{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}};
    ASSERT_EQ(epoch.local.size(), mine.size()) << "split " << split;
    for (size_t b = 0; b < mine.size(); ++b) {
      for (size_t i = 0; i < mine[b].size(); ++i) EXPECT_EQ(epoch.local[b].at(i), 1000 * rank + mine[b][i]);
    }
    EXPECT_EQ(epoch.end_flags, (std::vector<int>{0, 0, 1}));
    std::vector<int64_t> every_shard;
    for (int64_t r = 0; r < world; ++r) {
      for (int64_t i = 0; i < 10; ++i) every_shard.push_back(1000 * r + i);
    }
    EXPECT_EQ(sorted(epoch.gathered), every_shard);
    accel_loader_free(loader);
  }
  Stream uneven{3 + 2 * rank, 0, 1000 * rank};
  LoaderSettings settings;
  settings.already_sharded = true;
  settings.batch_size = 2;
  settings.drop_last = true;
  accel_loader_t* loader = make_stream_loader(&uneven, settings);
  std::vector<int64_t> seen;
  for (accel_batch_t* batch = nullptr; accel_loader_next(loader, &batch) == ACCEL_OK && batch != nullptr;
       accel_batch_free(batch)) {
    accel_tensor_t* indices = nullptr;
    ASSERT_EQ(accel_batch_get(batch, "index", &indices), ACCEL_OK);
    const auto values = long_values(indices);
    EXPECT_EQ(values.size(), 2u);
    seen.insert(seen.end(), values.begin(), values.end());
    accel_tensor_free(indices);
  }
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < (3 + 2 * rank) / 2 * 2; ++i) expected.push_back(1000 * rank + i);
  EXPECT_EQ(seen, expected);
  accel_loader_free(loader);
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_iterable(&dataset, start_stream, next_in_stream, &uneven), ACCEL_OK);
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_bool(options, "already_sharded", 1), ACCEL_OK);
  ASSERT_EQ(accel_options_set_string(options, "dispatch_batches", "true"), ACCEL_OK);
  EXPECT_EQ(accel_loader_new(&loader, state, dataset, options), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(accel_error_last()).find("already_sharded"), std::string::npos) << accel_error_last();
  accel_dataset_free(dataset);
  dataset = index_dataset(4);
  ASSERT_EQ(accel_options_set_string(options, "dispatch_batches", "auto"), ACCEL_OK);
  EXPECT_EQ(accel_loader_new(&loader, state, dataset, options), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(accel_error_last()).find("map-style"), std::string::npos) << accel_error_last();
  accel_dataset_free(dataset);
  accel_options_free(options);
}

TEST(Loader, PrefetchingThreadsYieldTheSameBatchesInOrder) {
  LoaderSettings settings;
  settings.shuffle = true;
  settings.data_seed = 99;
  settings.seedable = true;
  accel_loader_t* plain = make_loader(203, settings);
  settings.prefetch_threads = 2;
  accel_loader_t* prefetched = make_loader(203, settings);
  for (int pass = 0; pass < 2; ++pass) {
    const auto expected = run_epoch(plain);
    const auto got = run_epoch(prefetched);
    EXPECT_EQ(got.local, expected.local);
    EXPECT_EQ(got.end_flags, expected.end_flags);
  }
  ASSERT_EQ(accel_loader_skip_first_batches(prefetched, 5), ACCEL_OK);
  const auto skipped = run_epoch(prefetched);
  const auto full = run_epoch(plain);
  EXPECT_EQ(skipped.local, std::vector<std::vector<int64_t>>(full.local.begin() + 5, full.local.end()));
  accel_loader_free(plain);
  accel_loader_free(prefetched);
}

// Item kFailingItem of this dataset cannot be read: its get_item (which only rank 0 calls when batches
// are dispatched) returns 7.
constexpr int64_t kFailingItem = 5;

int index_or_fail(int64_t index, accel_sample_t* sample, void*) {
  if (index == kFailingItem) return 7;
  accel_tensor_t* tensor = nullptr;
  if (accel_tensor_from_buffer(&tensor, &index, ACCEL_DTYPE_INT64, nullptr, 0) != ACCEL_OK) return 1;
  const int code = accel_sample_add(sample, "index", tensor);
  accel_tensor_free(tensor);
  return code;
}

// Rank 0 tells the others that its read failed: every rank fails at once with rank 0's error, instead
// of the others waiting for the batch until the timeout (the launch sets ACCEL_TIMEOUT_S=20).
TEST(Loader, AFailedDispatchedReadFailsEveryRankWithRankZerosError) {
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_callback(&dataset, 12, index_or_fail, nullptr), ACCEL_OK) << accel_error_last();
  LoaderSettings settings;
  settings.dispatch = "true";
  settings.batch_size = 2;
  accel_loader_t* loader = loader_over(dataset, settings);
  accel_dataset_free(dataset);
  int code = ACCEL_OK;
  double slowest = 0;
  for (int calls = 0; code == ACCEL_OK && calls < 12; ++calls) {
    accel_batch_t* batch = nullptr;
    const auto start = std::chrono::steady_clock::now();
    code = accel_loader_next(loader, &batch);
    slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    ASSERT_TRUE(code != ACCEL_OK || batch != nullptr) << "the epoch ended without reaching item " << kFailingItem;
    accel_batch_free(batch);
  }
  EXPECT_EQ(code, ACCEL_ERR_CALLBACK) << accel_error_last();
  const std::string message = accel_error_last();
  EXPECT_NE(message.find("get_item returned 7 for item 5"), std::string::npos) << message;
  if (rank != 0) EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
  EXPECT_LT(slowest, 5.0);
  EXPECT_EQ(accel_state_is_broken(state), 0);
  accel_loader_free(loader);
}

// Batches per rank for `count` given batches with even_batches: every rank gets ceil(count / P).
size_t given_count(size_t count) { return (count + static_cast<size_t>(world) - 1) / static_cast<size_t>(world); }

// The reference 1.4 vector E (dynamic batch sizes, even_batches) generalised: every rank gets batches of
// the given list dealt round-robin, the first ones reused so that all ranks get as many.
TEST(Loader, AGivenListOfBatchesIsDealtLikeABatchSampler) {
  accel_dataset_t* dataset = index_dataset(20);
  const std::vector<int64_t> indices{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const std::vector<size_t> sizes{3, 2, 4, 1, 5};
  accel_loader_t* loader = nullptr;
  ASSERT_EQ(accel_loader_new_with_batches(&loader, state, dataset, indices.data(), sizes.data(), sizes.size(), nullptr),
            ACCEL_OK)
      << accel_error_last();
  // Batches differ in size across ranks, so they are checked locally rather than gathered.
  std::vector<std::vector<int64_t>> local;
  for (accel_batch_t* batch = nullptr; accel_loader_next(loader, &batch) == ACCEL_OK && batch != nullptr;) {
    accel_tensor_t* tensor = nullptr;
    EXPECT_EQ(accel_batch_get(batch, "index", &tensor), ACCEL_OK);
    local.push_back(long_values(tensor));
    accel_tensor_free(tensor);
    accel_batch_free(batch);
  }
  EXPECT_EQ(static_cast<int64_t>(local.size()), length_of(loader));
  EXPECT_EQ(local.size(), (given_count(5)));
  const std::vector<std::vector<int64_t>> given{{0, 1, 2}, {3, 4}, {5, 6, 7, 8}, {9}, {10, 11, 12, 13, 14}};
  for (size_t i = 0; i < local.size(); ++i) {
    EXPECT_EQ(local[i], given[(i * static_cast<size_t>(world) + static_cast<size_t>(rank)) % given.size()]) << i;
  }
  accel_loader_free(loader);
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_bool(options, "shuffle", 1), ACCEL_OK);
  EXPECT_EQ(accel_loader_new_with_batches(&loader, state, dataset, indices.data(), sizes.data(), sizes.size(), options),
            ACCEL_ERR_INVALID_ARGUMENT);
  const int64_t outside[] = {25};
  const size_t one[] = {1};
  EXPECT_EQ(accel_loader_new_with_batches(&loader, state, dataset, outside, one, 1, nullptr), ACCEL_ERR_OUT_OF_RANGE);
  accel_options_free(options);
  accel_dataset_free(dataset);
}

}  // namespace
