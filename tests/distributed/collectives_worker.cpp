// Runs on every rank under `accel launch`: each test is a collective that all ranks take part in, in
// the same order, and checks the reference vectors of Accelerate's test suite.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "worker.hpp"

namespace {

using namespace worker;

std::vector<float> values_of(const accel_tensor_t* tensor) { return float_values(tensor); }

TEST(Collectives, StateSeesTheLaunch) {
  EXPECT_EQ(accel_state_distributed_type(state), ACCEL_DISTRIBUTED_MULTI_CPU);
  // ctest runs this worker with the default transport (shared memory on one host) and with Gloo's.
  const char* transport = std::getenv("ACCEL_INTRA_NODE_TRANSPORT");
  EXPECT_STREQ(accel_state_backend(state), transport != nullptr && std::string(transport) == "gloo" ? "gloo" : "gloo+shm");
  EXPECT_EQ(accel_state_is_main_process(state), rank == 0 ? 1 : 0);
  EXPECT_EQ(accel_state_is_last_process(state), rank == world - 1 ? 1 : 0);
  EXPECT_EQ(accel_state_wait_for_everyone(state), ACCEL_OK) << accel_error_last();
}

TEST(Collectives, GatherIsRankOrdered) {
  accel_tensor_t* mine = floats(arange(world, 1.0f + static_cast<float>(world * rank)));
  accel_tensor_t* all = nullptr;
  ASSERT_EQ(accel_state_gather(state, mine, &all), ACCEL_OK) << accel_error_last();
  EXPECT_EQ(values_of(all), arange(world * world, 1.0f));
  accel_tensor_free(mine);
  accel_tensor_free(all);
}

// Rank r holds r + 1 rows of [r, r]: the gather cuts every rank's padding out again, and gather_for_metrics
// (no loader active) is the same. Sizes beyond dim 0 must still agree.
TEST(Collectives, GatherOfDifferentRowCountsNeedsNoPadding) {
  accel_tensor_t* mine = floats(std::vector<float>(static_cast<size_t>(2 * (rank + 1)), static_cast<float>(rank)), {rank + 1, 2});
  std::vector<float> expected;
  for (int r = 0; r < world; ++r) expected.insert(expected.end(), static_cast<size_t>(2 * (r + 1)), static_cast<float>(r));
  for (auto collective : {accel_state_gather, accel_state_gather_for_metrics}) {
    accel_tensor_t* all = nullptr;
    ASSERT_EQ(collective(state, mine, &all), ACCEL_OK) << accel_error_last();
    ASSERT_EQ(accel_tensor_ndim(all), 2u);
    EXPECT_EQ(accel_tensor_shape(all)[0], world * (world + 1) / 2);
    EXPECT_EQ(values_of(all), expected);
    accel_tensor_free(all);
  }
  accel_tensor_free(mine);
  accel_tensor_t* columns_differ = floats(arange(rank + 1), {1, rank + 1});
  accel_tensor_t* out = nullptr;
  EXPECT_EQ(accel_state_gather(state, columns_differ, &out), ACCEL_ERR_SHAPE_MISMATCH);
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(std::string(accel_error_last()).find("process " + std::to_string(r) + ": [1, " + std::to_string(r + 1) + "]"),
              std::string::npos) << accel_error_last();
  }
  EXPECT_EQ(out, nullptr);
  accel_tensor_free(columns_differ);
}

TEST(Collectives, ReduceSumMeanMax) {
  accel_tensor_t* mine = floats(reduce_input());
  for (const auto& [reduction, expected] : reduce_cases()) {
    accel_tensor_t* out = nullptr;
    ASSERT_EQ(accel_state_reduce(state, mine, reduction, &out), ACCEL_OK) << accel_error_last();
    EXPECT_EQ(values_of(out), expected) << reduction;
    accel_tensor_free(out);
  }
  accel_tensor_t* out = nullptr;
  EXPECT_EQ(accel_state_reduce(state, mine, "min", &out), ACCEL_ERR_INVALID_ARGUMENT);
  accel_tensor_free(mine);
}

// Accelerate's reduce of a nested structure: leaves named by their paths, of two dtypes and shapes, reduced
// in one call with the values per-leaf reduce gives; a leaf whose shape differs on one rank fails on every
// rank naming it; mean refuses an integer leaf by name.
TEST(Collectives, ReduceNamedTensorsLeafByLeaf) {
  const int64_t counts[] = {rank + 1, 2 * rank};
  accel_tensor_t* loss = floats({static_cast<float>(rank + 1)});
  accel_tensor_t* grid = floats(arange(6, static_cast<float>(rank)), {2, 3});
  accel_tensor_t* count = nullptr;
  ASSERT_EQ(accel_tensor_from_buffer(&count, counts, ACCEL_DTYPE_INT64, nullptr, 0), ACCEL_OK);
  accel_tensor_t* count_pair = nullptr;
  const int64_t pair_shape[] = {2};
  ASSERT_EQ(accel_tensor_from_buffer(&count_pair, counts, ACCEL_DTYPE_INT64, pair_shape, 1), ACCEL_OK);
  const char* names[] = {"loss", "metrics.grid", "metrics.counts.0", "metrics.counts.1"};
  accel_tensor_t* inputs[] = {loss, grid, count, count_pair};
  for (const char* reduction : {"sum", "max"}) {
    accel_tensor_t* outputs[4] = {};
    ASSERT_EQ(accel_state_reduce_named(state, names, inputs, 4, reduction, outputs), ACCEL_OK) << accel_error_last();
    for (size_t i = 0; i < 4; ++i) {
      accel_tensor_t* alone = nullptr;
      ASSERT_EQ(accel_state_reduce(state, inputs[i], reduction, &alone), ACCEL_OK) << accel_error_last();
      ASSERT_EQ(accel_tensor_dtype(outputs[i]), accel_tensor_dtype(alone)) << names[i];
      if (accel_tensor_dtype(alone) == ACCEL_DTYPE_INT64) {
        EXPECT_EQ(long_values(outputs[i]), long_values(alone)) << names[i] << " " << reduction;
      } else {
        EXPECT_EQ(values_of(outputs[i]), values_of(alone)) << names[i] << " " << reduction;
      }
      EXPECT_EQ(accel_tensor_ndim(outputs[i]), accel_tensor_ndim(inputs[i])) << names[i];
      accel_tensor_free(alone);
      accel_tensor_free(outputs[i]);
    }
  }
  accel_tensor_t* mean[2] = {};
  ASSERT_EQ(accel_state_reduce_named(state, names, inputs, 2, "mean", mean), ACCEL_OK) << accel_error_last();
  EXPECT_FLOAT_EQ(values_of(mean[0]).at(0), static_cast<float>(world + 1) / 2.0f);
  accel_tensor_free(mean[0]);
  accel_tensor_free(mean[1]);
  accel_tensor_t* refused[4] = {};
  EXPECT_EQ(accel_state_reduce_named(state, names, inputs, 4, "mean", refused), ACCEL_ERR_DTYPE);
  EXPECT_NE(std::string(accel_error_last()).find("'metrics.counts.0' is Long"), std::string::npos) << accel_error_last();
  EXPECT_EQ(refused[0], nullptr);
  accel_tensor_t* uneven = floats(arange(1 + (rank == 0 ? 1 : 0), 0.0f));
  accel_tensor_t* uneven_inputs[] = {loss, uneven};
  const char* uneven_names[] = {"loss", "parts.0"};
  EXPECT_EQ(accel_state_reduce_named(state, uneven_names, uneven_inputs, 2, "sum", refused), ACCEL_ERR_SHAPE_MISMATCH);
  EXPECT_NE(std::string(accel_error_last()).find("process 0: 'loss': [1] Float; 'parts.0': [2] Float"), std::string::npos)
      << accel_error_last();
  EXPECT_NE(std::string(accel_error_last()).find("process 1: 'loss': [1] Float; 'parts.0': [1] Float"), std::string::npos)
      << accel_error_last();
  for (auto* tensor : {loss, grid, count, count_pair, uneven}) accel_tensor_free(tensor);
}

TEST(Collectives, PadAcrossProcesses) {
  accel_tensor_t* mine = floats(arange(rank == 0 ? world + 1 : world));
  accel_tensor_t* padded = nullptr;
  ASSERT_EQ(accel_state_pad_across_processes(state, mine, 0, 0.0, 0, &padded), ACCEL_OK) << accel_error_last();
  ASSERT_EQ(accel_tensor_numel(padded), world + 1);
  auto expected = arange(world + 1);
  if (rank != 0) expected.back() = 0;
  EXPECT_EQ(values_of(padded), expected);
  accel_tensor_free(padded);
  ASSERT_EQ(accel_state_pad_across_processes(state, mine, -1, -1.0, 1, &padded), ACCEL_OK) << accel_error_last();
  if (rank != 0) EXPECT_EQ(values_of(padded).front(), -1.0f);
  accel_tensor_free(padded);
  accel_tensor_free(mine);
}

TEST(Collectives, BroadcastFromTheLastRankWritesThroughDlpackMemory) {
  accel_tensor_t* mine = floats(arange(world, 1.0f + static_cast<float>(world * rank)));
  void* data = nullptr;
  ASSERT_EQ(accel_tensor_data(mine, &data), ACCEL_OK);
  ASSERT_EQ(accel_state_broadcast(state, mine, world - 1), ACCEL_OK) << accel_error_last();
  const auto expected = arange(world, 1.0f + static_cast<float>(world * (world - 1)));
  EXPECT_EQ(values_of(mine), expected);
  EXPECT_EQ(static_cast<float*>(data)[0], expected[0]);
  accel_tensor_free(mine);
}

accel_tensor_t* tensor_of(const void* data, int32_t dtype, std::vector<int64_t> shape) {
  accel_tensor_t* tensor = nullptr;
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, data, dtype, shape.data(), shape.size()), ACCEL_OK) << accel_error_last();
  return tensor;
}

// bfloat16 moved bit for bit, NaN payloads and negative zero included, though LibTorch 1.13's Gloo has no
// bfloat16 (it travels as float16 bits: a broadcast computes nothing).
TEST(Collectives, BroadcastCarriesBfloat16Bits) {
  std::vector<uint16_t> bits{0x3f80, 0x8000, 0x7fc1, 0xff81, 0x0001, static_cast<uint16_t>(0x4000 + rank)};
  accel_tensor_t* mine = tensor_of(bits.data(), ACCEL_DTYPE_BFLOAT16, {static_cast<int64_t>(bits.size())});
  ASSERT_EQ(accel_state_broadcast(state, mine, world - 1), ACCEL_OK) << accel_error_last();
  void* data = nullptr;
  ASSERT_EQ(accel_tensor_data(mine, &data), ACCEL_OK);
  const std::vector<uint16_t> expected{0x3f80, 0x8000, 0x7fc1, 0xff81, 0x0001, static_cast<uint16_t>(0x4000 + world - 1)};
  EXPECT_EQ(std::vector<uint16_t>(static_cast<uint16_t*>(data), static_cast<uint16_t*>(data) + bits.size()), expected);
  accel_tensor_free(mine);
}

// Rank r's element i is 1000 r + i (exact in every type below): the sum's element i is world * i + 1000 *
// (0 + 1 + ... + world - 1). `n` elements per rank's share: 100'003 float32 ones take the shared-memory
// segment past its first size and split unevenly into its ranks' slices; int64 goes through Gloo.
template <class T>
void expect_reduce_scatter(int32_t dtype, int64_t n) {
  std::vector<T> input(static_cast<size_t>(world * n));
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<T>(1000 * rank + static_cast<int64_t>(i));
  accel_tensor_t* in = tensor_of(input.data(), dtype, {world, n});
  std::vector<T> share(static_cast<size_t>(n), T(-1));
  accel_tensor_t* out = tensor_of(share.data(), dtype, {n});
  void* out_data = nullptr;
  ASSERT_EQ(accel_tensor_data(out, &out_data), ACCEL_OK);
  const int64_t offset = 1000 * world * (world - 1) / 2;
  for (const char* reduction : {"sum", "mean"}) {
    if (dtype == ACCEL_DTYPE_INT64 && std::string(reduction) == "mean") continue;
    ASSERT_EQ(accel_state_reduce_scatter(state, in, reduction, out), ACCEL_OK) << accel_error_last();
    // Written where the caller's memory is (DLPack): nothing to copy back.
    const T* got = static_cast<const T*>(out_data);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T sum = static_cast<T>(world * (rank * n + i) + offset);
      const T expected = std::string(reduction) == "sum" ? sum : static_cast<T>(sum / static_cast<T>(world));
      if (got[i] != expected) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << reduction << " of " << n << " elements per rank, first " << static_cast<double>(got[0]);
  }
  accel_tensor_free(out);
  accel_tensor_free(in);
}

TEST(Collectives, ReduceScatterSumAndMeanIntoTheCallersTensor) {
  expect_reduce_scatter<float>(ACCEL_DTYPE_FLOAT32, 5);
  expect_reduce_scatter<float>(ACCEL_DTYPE_FLOAT32, 100'003);
  expect_reduce_scatter<double>(ACCEL_DTYPE_FLOAT64, 7);
  expect_reduce_scatter<int64_t>(ACCEL_DTYPE_INT64, 3);
}

// Rank r's [2, 3] tensor holds 6 r .. 6 r + 5: gathered into [world * 2, 3] and [world, 2, 3] outputs, in
// rank order; int64 through Gloo.
TEST(Collectives, AllGatherIntoTheCallersTensorInRankOrder) {
  accel_tensor_t* mine = floats(arange(6, static_cast<float>(6 * rank)), {2, 3});
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{world * 2, 3}, std::vector<int64_t>{world, 2, 3}}) {
    std::vector<float> all(static_cast<size_t>(world * 6), -1.0f);
    accel_tensor_t* out = tensor_of(all.data(), ACCEL_DTYPE_FLOAT32, shape);
    ASSERT_EQ(accel_state_all_gather(state, mine, out), ACCEL_OK) << accel_error_last();
    void* data = nullptr;
    ASSERT_EQ(accel_tensor_data(out, &data), ACCEL_OK);
    const auto* got = static_cast<const float*>(data);
    EXPECT_EQ(std::vector<float>(got, got + world * 6), arange(world * 6)) << shape.size() << " dimensions";
    accel_tensor_free(out);
  }
  const int64_t counts[] = {rank, -rank};
  accel_tensor_t* longs = tensor_of(counts, ACCEL_DTYPE_INT64, {2});
  std::vector<int64_t> gathered(static_cast<size_t>(2 * world));
  accel_tensor_t* out = tensor_of(gathered.data(), ACCEL_DTYPE_INT64, {2 * world});
  ASSERT_EQ(accel_state_all_gather(state, longs, out), ACCEL_OK) << accel_error_last();
  std::vector<int64_t> expected;
  for (int64_t r = 0; r < world; ++r) expected.insert(expected.end(), {r, -r});
  EXPECT_EQ(long_values(out), expected);
  accel_tensor_free(out);
  accel_tensor_free(longs);
  accel_tensor_free(mine);
}

// A wrong output on one rank fails every rank at once with the same message naming that process; the
// group stays usable. Inputs that differ name every process's shape.
TEST(Collectives, ReduceScatterAndAllGatherShapeErrorsFailOnEveryRank) {
  accel_tensor_t* mine = floats(arange(2 * world), {2 * world});
  const int64_t last = world - 1;
  accel_tensor_t* share = floats(arange(rank == last ? 3 : 2));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(accel_state_reduce_scatter(state, mine, "sum", share), ACCEL_ERR_SHAPE_MISMATCH);
  EXPECT_NE(std::string(accel_error_last()).find("reduce_scatter: process " + std::to_string(last) + "'s output has 3 elements, but needs 2"),
            std::string::npos) << accel_error_last();
  accel_tensor_t* gathered = floats(arange(2 * world * world + (rank == last ? 1 : 0)));
  EXPECT_EQ(accel_state_all_gather(state, mine, gathered), ACCEL_ERR_SHAPE_MISMATCH);
  EXPECT_NE(std::string(accel_error_last()).find("all_gather: process " + std::to_string(last) + "'s output has"),
            std::string::npos) << accel_error_last();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  const double zeros[2] = {0, 0};
  accel_tensor_t* wrong_type = tensor_of(zeros, rank == last ? ACCEL_DTYPE_FLOAT64 : ACCEL_DTYPE_FLOAT32, {2});
  EXPECT_EQ(accel_state_reduce_scatter(state, mine, "sum", wrong_type), ACCEL_ERR_DTYPE);
  EXPECT_NE(std::string(accel_error_last()).find("is Double, its input Float"), std::string::npos) << accel_error_last();
  accel_tensor_t* ragged = floats(arange(world * (rank + 1)));
  accel_tensor_t* ragged_out = floats(arange(rank + 1));
  EXPECT_EQ(accel_state_reduce_scatter(state, ragged, "sum", ragged_out), ACCEL_ERR_SHAPE_MISMATCH);
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(std::string(accel_error_last()).find("process " + std::to_string(r) + ": [" + std::to_string(world * (r + 1)) + "] Float"),
              std::string::npos) << accel_error_last();
  }
  EXPECT_EQ(accel_state_reduce_scatter(state, mine, "max", share), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(accel_state_is_broken(state), 0);
  // Still usable: a correct call goes through.
  accel_tensor_t* good = floats(arange(2));
  ASSERT_EQ(accel_state_reduce_scatter(state, mine, "sum", good), ACCEL_OK) << accel_error_last();
  EXPECT_EQ(values_of(good), std::vector<float>({static_cast<float>(world * 2 * rank), static_cast<float>(world * (2 * rank + 1))}));
  for (auto* tensor : {mine, share, gathered, wrong_type, ragged, ragged_out, good}) accel_tensor_free(tensor);
}

TEST(Collectives, GatherBytesOfDifferentLengths) {
  const std::string mine(static_cast<size_t>(rank), static_cast<char>('a' + rank));
  accel_bytes_list_t* list = nullptr;
  ASSERT_EQ(accel_state_gather_bytes(state, mine.data(), mine.size(), &list), ACCEL_OK) << accel_error_last();
  ASSERT_EQ(accel_bytes_list_count(list), static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const void* data = nullptr;
    size_t size = 0;
    ASSERT_EQ(accel_bytes_list_get(list, static_cast<size_t>(r), &data, &size), ACCEL_OK);
    EXPECT_EQ(std::string(static_cast<const char*>(data), size), std::string(static_cast<size_t>(r), static_cast<char>('a' + r)));
  }
  const void* data = nullptr;
  size_t size = 0;
  EXPECT_EQ(accel_bytes_list_get(list, static_cast<size_t>(world), &data, &size), ACCEL_ERR_OUT_OF_RANGE);
  accel_bytes_list_free(list);
}

// Every rank must fail, with every rank's shape in the message.
void expect_mismatch(int code) {
  EXPECT_EQ(code, ACCEL_ERR_SHAPE_MISMATCH) << accel_error_last();
  const std::string message = accel_error_last();
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(message.find("process " + std::to_string(r) + ": [" + std::to_string(r + 1) + "]"), std::string::npos)
        << message;
  }
}

TEST(Collectives, MismatchedShapesFailOnEveryRankNamingEachShape) {
  accel_tensor_t* mine = floats(arange(rank + 1));
  accel_tensor_t* out = nullptr;
  expect_mismatch(accel_state_reduce(state, mine, "sum", &out));
  expect_mismatch(accel_state_broadcast(state, mine, 0));
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(accel_state_is_broken(state), 0);
  accel_tensor_t* ragged_dims = floats(arange(2), rank == 0 ? std::vector<int64_t>{2} : std::vector<int64_t>{1, 2});
  EXPECT_EQ(accel_state_pad_across_processes(state, ragged_dims, 0, 0.0, 0, &out), ACCEL_ERR_SHAPE_MISMATCH);
  EXPECT_NE(std::string(accel_error_last()).find("number of dimensions"), std::string::npos);
  accel_tensor_free(ragged_dims);
  accel_tensor_free(mine);
}

// Rank 0's tensor has no dim 1: it must still take part in the shape exchange, so that every rank fails
// together, at once, rather than rank 0 alone while the others wait until the timeout (the launch sets
// ACCEL_TIMEOUT_S=20).
TEST(Collectives, PadWithADimOnlySomeRanksHaveFailsOnEveryRankAtOnce) {
  accel_tensor_t* mine = floats(arange(2), rank == 0 ? std::vector<int64_t>{2} : std::vector<int64_t>{1, 2});
  accel_tensor_t* out = nullptr;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(accel_state_pad_across_processes(state, mine, 1, 0.0, 0, &out), ACCEL_ERR_SHAPE_MISMATCH) << accel_error_last();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(std::string(accel_error_last()).find("number of dimensions"), std::string::npos) << accel_error_last();
  EXPECT_LT(elapsed, 5.0);
  EXPECT_EQ(accel_state_is_broken(state), 0);
  accel_tensor_free(mine);
}

TEST(Collectives, ASecondStateSharesTheGroup) {
  accel_state_t* second = nullptr;
  ASSERT_EQ(accel_state_new(&second, nullptr), ACCEL_OK) << accel_error_last();
  EXPECT_EQ(accel_state_process_index(second), rank);
  accel_tensor_t* mine = floats({static_cast<float>(rank)});
  accel_tensor_t* all = nullptr;
  ASSERT_EQ(accel_state_gather(second, mine, &all), ACCEL_OK) << accel_error_last();
  EXPECT_EQ(values_of(all), arange(world));
  accel_tensor_free(all);
  accel_tensor_free(mine);
  accel_state_free(second);
}

}  // namespace
