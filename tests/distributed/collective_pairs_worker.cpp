// A property test of the collectives on 2 ranks: random pairs of calls, one per rank, drawn from one seed so
// that both ranks know both calls (the kind, the number of elements, the dtype, the reduction, the root).
// Every pair whose calls differ where they must agree fails on both ranks with the error an oracle predicts
// (different collectives: ACCEL_ERR_INVALID_STATE naming both collectives and both processes) within a
// second, and leaves the group usable; every pair that agrees gives the right answer. Sizes include zero
// elements; under ./dev asan no call may draw a sanitizer report. COLLECTIVE_PAIRS_SEED picks another seed.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "worker.hpp"

namespace {

using namespace worker;

enum Kind { kGather, kGatherForMetrics, kGatherBytes, kReduce, kReduceNamed, kBroadcast, kPad, kReduceScatter, kAllGather,
            kWaitForEveryone, kKinds };
const std::array<const char*, kKinds> kNames = {"gather",        "gather_for_metrics", "gather_bytes", "reduce",
                                                "reduce_named",  "broadcast",          "pad_across_processes",
                                                "reduce_scatter", "all_gather",        "wait_for_everyone"};
const std::array<int32_t, 3> kDtypes = {ACCEL_DTYPE_FLOAT32, ACCEL_DTYPE_FLOAT64, ACCEL_DTYPE_INT64};

// One rank's call.
struct Side {
  Kind kind = kWaitForEveryone;
  int64_t n = 0;  // elements of the input (reduce_scatter: of the output, its input having 2n)
  int32_t dtype = ACCEL_DTYPE_FLOAT32;
  std::string reduction = "sum";
  int32_t root = 0;
};

bool is_float(int32_t dtype) { return dtype != ACCEL_DTYPE_INT64; }

Side draw(std::mt19937_64& rng) {
  Side side;
  side.kind = static_cast<Kind>(rng() % kKinds);
  side.n = static_cast<int64_t>(rng() % 6);  // 0 included
  side.dtype = kDtypes[rng() % kDtypes.size()];
  const char* reductions[] = {"sum", "mean", "max"};
  side.reduction = reductions[rng() % (side.kind == kReduceScatter ? 2 : 3)];
  side.root = static_cast<int32_t>(rng() % 2);
  return side;
}

// Rank 1's call: the same as rank 0's (a match), one field changed, or another draw altogether.
Side pair_of(const Side& first, std::mt19937_64& rng) {
  Side second = first;
  switch (rng() % 7) {
    case 0: case 1: break;
    case 2: second.n = (first.n + 1 + static_cast<int64_t>(rng() % 3)) % 6; break;
    case 3:
      while (second.dtype == first.dtype) second.dtype = kDtypes[rng() % kDtypes.size()];
      break;
    case 4: second.reduction = first.reduction == "sum" ? "mean" : "sum"; break;
    case 5: second.root = 1 - first.root; break;
    default: second = draw(rng); break;
  }
  return second;
}

bool same_input(const Side& a, const Side& b) { return a.n == b.n && a.dtype == b.dtype; }

// The code both ranks must return for the pair (rank 0's call, rank 1's call), in the order the checks run.
int expected_code(const Side& a, const Side& b) {
  if (a.kind != b.kind) return ACCEL_ERR_INVALID_STATE;
  const bool reduces = a.kind == kReduce || a.kind == kReduceNamed || a.kind == kReduceScatter;
  if (reduces && a.reduction != b.reduction) return ACCEL_ERR_INVALID_ARGUMENT;
  if (a.kind == kBroadcast && a.root != b.root) return ACCEL_ERR_INVALID_ARGUMENT;
  switch (a.kind) {
    case kGather: case kGatherForMetrics: return a.dtype == b.dtype ? ACCEL_OK : ACCEL_ERR_SHAPE_MISMATCH;
    case kReduce: case kReduceNamed: case kReduceScatter:
      if (!same_input(a, b)) return ACCEL_ERR_SHAPE_MISMATCH;
      return a.reduction == "mean" && !is_float(a.dtype) ? ACCEL_ERR_DTYPE : ACCEL_OK;
    case kBroadcast: case kAllGather: return same_input(a, b) ? ACCEL_OK : ACCEL_ERR_SHAPE_MISMATCH;
    default: return ACCEL_OK;
  }
}

// Rank r's input, element i: small integers, exact in every dtype and in their sums and halves.
double value(int32_t of_rank, int64_t i, int trial) { return of_rank * 100 + i + 1 + trial % 7; }

accel_tensor_t* input_of(const Side& side, int32_t of_rank, int64_t numel, int trial) {
  std::vector<double> doubles;
  for (int64_t i = 0; i < numel; ++i) doubles.push_back(value(of_rank, i, trial));
  std::vector<float> floats(doubles.begin(), doubles.end());
  std::vector<int64_t> longs(doubles.begin(), doubles.end());
  const void* data = side.dtype == ACCEL_DTYPE_FLOAT32   ? static_cast<const void*>(floats.data())
                     : side.dtype == ACCEL_DTYPE_FLOAT64 ? static_cast<const void*>(doubles.data())
                                                         : static_cast<const void*>(longs.data());
  accel_tensor_t* tensor = nullptr;
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, data, side.dtype, &numel, 1), ACCEL_OK) << accel_error_last();
  return tensor;
}

std::vector<double> values_of(const accel_tensor_t* tensor) {
  const int64_t numel = accel_tensor_numel(tensor);
  std::vector<double> values;
  switch (accel_tensor_dtype(tensor)) {
    case ACCEL_DTYPE_FLOAT32: for (float v : float_values(tensor)) values.push_back(v); break;
    case ACCEL_DTYPE_INT64: for (int64_t v : long_values(tensor)) values.push_back(static_cast<double>(v)); break;
    default: {
      values.resize(static_cast<size_t>(numel));
      EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, values.data(), values.size() * sizeof(double)), ACCEL_OK);
    }
  }
  return values;
}

std::vector<double> range_of(int32_t of_rank, int64_t from, int64_t to, int trial) {
  std::vector<double> values;
  for (int64_t i = from; i < to; ++i) values.push_back(value(of_rank, i, trial));
  return values;
}

std::vector<double> reduced(const std::string& reduction, int64_t from, int64_t to, int trial) {
  std::vector<double> values;
  for (int64_t i = from; i < to; ++i) {
    const double a = value(0, i, trial), b = value(1, i, trial);
    values.push_back(reduction == "sum" ? a + b : reduction == "mean" ? (a + b) / 2 : std::max(a, b));
  }
  return values;
}

std::vector<double> joined(std::vector<double> first, const std::vector<double>& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

// Runs this rank's side; on success checks the result against what the pair's calls must give.
int run(const Side& mine, const Side& other, int trial) {
  const Side& side0 = rank == 0 ? mine : other;
  const Side& side1 = rank == 0 ? other : mine;
  const int64_t input_numel = mine.kind == kReduceScatter ? 2 * mine.n : mine.n;
  accel_tensor_t* input = input_of(mine, rank, input_numel, trial);
  accel_tensor_t* out = nullptr;
  int code = ACCEL_OK;
  std::vector<double> expected;
  switch (mine.kind) {
    case kGather:
    case kGatherForMetrics:
      code = (mine.kind == kGather ? accel_state_gather : accel_state_gather_for_metrics)(state, input, &out);
      expected = joined(range_of(0, 0, side0.n, trial), range_of(1, 0, side1.n, trial));
      break;
    case kGatherBytes: {
      const std::string bytes(static_cast<size_t>(mine.n), static_cast<char>('a' + rank));
      accel_bytes_list_t* list = nullptr;
      code = accel_state_gather_bytes(state, bytes.data(), bytes.size(), &list);
      if (code == ACCEL_OK) {
        for (int32_t r = 0; r < 2; ++r) {
          const void* data = nullptr;
          size_t size = 0;
          EXPECT_EQ(accel_bytes_list_get(list, static_cast<size_t>(r), &data, &size), ACCEL_OK);
          const size_t length = static_cast<size_t>((r == 0 ? side0 : side1).n);
          EXPECT_EQ(std::string(static_cast<const char*>(data), size), std::string(length, static_cast<char>('a' + r)));
        }
      }
      accel_bytes_list_free(list);
      break;
    }
    case kReduce:
      code = accel_state_reduce(state, input, mine.reduction.c_str(), &out);
      expected = reduced(mine.reduction, 0, mine.n, trial);
      break;
    case kReduceNamed: {
      const char* names[] = {"metrics.x"};
      accel_tensor_t* inputs[] = {input};
      code = accel_state_reduce_named(state, names, inputs, 1, mine.reduction.c_str(), &out);
      expected = reduced(mine.reduction, 0, mine.n, trial);
      break;
    }
    case kBroadcast:
      code = accel_state_broadcast(state, input, mine.root);
      if (code == ACCEL_OK) EXPECT_EQ(values_of(input), range_of(mine.root, 0, mine.n, trial)) << "trial " << trial;
      break;
    case kPad: {
      code = accel_state_pad_across_processes(state, input, 0, -1.0, 0, &out);
      expected = range_of(rank, 0, mine.n, trial);
      expected.resize(static_cast<size_t>(std::max(side0.n, side1.n)), -1.0);
      break;
    }
    case kReduceScatter: {
      accel_tensor_t* output = input_of(mine, rank, mine.n, trial);
      code = accel_state_reduce_scatter(state, input, mine.reduction.c_str(), output);
      if (code == ACCEL_OK) {
        EXPECT_EQ(values_of(output), reduced(mine.reduction, rank * mine.n, (rank + 1) * mine.n, trial)) << "trial " << trial;
      }
      accel_tensor_free(output);
      break;
    }
    case kAllGather: {
      accel_tensor_t* output = input_of(mine, rank, 2 * mine.n, trial);
      code = accel_state_all_gather(state, input, output);
      if (code == ACCEL_OK) {
        EXPECT_EQ(values_of(output), joined(range_of(0, 0, mine.n, trial), range_of(1, 0, mine.n, trial))) << "trial " << trial;
      }
      accel_tensor_free(output);
      break;
    }
    case kWaitForEveryone:
    case kKinds:
      code = accel_state_wait_for_everyone(state);
      break;
  }
  if (code == ACCEL_OK && out != nullptr) EXPECT_EQ(values_of(out), expected) << kNames[mine.kind] << ", trial " << trial;
  accel_tensor_free(out);
  accel_tensor_free(input);
  return code;
}

std::string describe(const Side& side) {
  return std::string(kNames[side.kind]) + " n=" + std::to_string(side.n) + " dtype=" + std::to_string(side.dtype) +
         " reduction=" + side.reduction + " root=" + std::to_string(side.root);
}

TEST(CollectivePairs, EveryMismatchFailsEveryRankAndEveryMatchIsRight) {
  ASSERT_EQ(world, 2);
  const char* seed_text = std::getenv("COLLECTIVE_PAIRS_SEED");
  const uint64_t seed = seed_text != nullptr ? std::strtoull(seed_text, nullptr, 10) : 20261127;
  std::mt19937_64 rng(seed);
  int mismatches = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const Side first = draw(rng);
    const Side second = pair_of(first, rng);
    const int expected = expected_code(first, second);
    // Both ranks start each pair together, so that the time a failure takes is the verdict's own.
    ASSERT_EQ(accel_state_wait_for_everyone(state), ACCEL_OK) << accel_error_last();
    const auto start = std::chrono::steady_clock::now();
    const int code = run(rank == 0 ? first : second, rank == 0 ? second : first, trial);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string context = "seed " + std::to_string(seed) + ", trial " + std::to_string(trial) + ": process 0 " +
                                describe(first) + ", process 1 " + describe(second) + ": " + accel_error_last();
    ASSERT_EQ(code, expected) << context;
    if (expected == ACCEL_OK) continue;
    ++mismatches;
    EXPECT_LT(seconds, 1.0) << context;
    EXPECT_EQ(accel_state_is_broken(state), 0) << context;
    if (expected == ACCEL_ERR_INVALID_STATE) {
      const std::string message = accel_error_last();
      for (const auto& [process, side] : {std::pair{0, first}, std::pair{1, second}}) {
        EXPECT_NE(message.find("process " + std::to_string(process) + ": " + kNames[side.kind]), std::string::npos) << context;
      }
    }
  }
  EXPECT_GT(mismatches, 100);
}

}  // namespace
