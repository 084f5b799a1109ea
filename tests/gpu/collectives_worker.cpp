// Collectives on CUDA tensors through the C ABI, on every rank under `accel launch` (without --cpu):
// one process with ACCEL_BACKEND=nccl, and two ranks sharing one GPU with ACCEL_BACKEND=gloo (NCCL refuses
// two ranks on one device). Exits 77 (ctest's skip) on a host without CUDA.
#include <ATen/dlpack.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "accel.h"
#include "worker.hpp"

namespace {

using worker::arange;
using worker::reduce_cases;
using worker::reduce_input;
using worker::rank;
using worker::state;
using worker::world;

std::string last_error() { return accel_error_last(); }

// A float tensor on the state's device, made on the host and sent there as a user would.
accel_tensor_t* cuda_floats(const std::vector<float>& values, std::vector<int64_t> shape = {}) {
  accel_tensor_t* host = worker::floats(values, std::move(shape));
  accel_tensor_t* device = nullptr;
  EXPECT_EQ(accel_state_send_to_device(state, host, 0, &device), ACCEL_OK) << last_error();
  EXPECT_EQ(std::string(accel_tensor_device(device)), accel_state_device(state));
  accel_tensor_free(host);
  return device;
}

std::vector<float> values_of(const accel_tensor_t* tensor) { return worker::float_values(tensor); }

void* device_pointer(const accel_tensor_t* tensor) {
  DLManagedTensor* exported = nullptr;
  EXPECT_EQ(accel_tensor_to_dlpack(&exported, tensor), ACCEL_OK) << last_error();
  if (exported == nullptr) return nullptr;
  void* data = static_cast<char*>(exported->dl_tensor.data) + exported->dl_tensor.byte_offset;
  exported->deleter(exported);
  return data;
}

TEST(GpuCollectives, TheStateUsesTheGpuOfItsLocalRank) {
  const int count = c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).deviceCount();
  EXPECT_EQ(std::string(accel_state_device(state)),
            "cuda:" + std::to_string(accel_state_local_process_index(state) % count));
  if (world == 1) {
    EXPECT_EQ(accel_state_distributed_type(state), ACCEL_DISTRIBUTED_NO);
  } else {
    EXPECT_EQ(accel_state_distributed_type(state), ACCEL_DISTRIBUTED_MULTI_GPU);
  }
  EXPECT_EQ(accel_state_wait_for_everyone(state), ACCEL_OK) << last_error();
}

// Said in the log rather than passed silently: accel makes no process group for one process
// (accel_state_backend is then ""), so the one-process launch checks the collectives' CUDA paths but
// not NCCL itself.
TEST(GpuCollectives, TheAskedBackendIsInUse) {
  const char* variable = std::getenv("ACCEL_BACKEND");
  const std::string asked = variable != nullptr && std::string(variable) != "auto" ? variable : "nccl";
  if (world == 1 && std::string(accel_state_backend(state)).empty()) {
    GTEST_SKIP() << "one process makes no process group: backend " << asked << " is not exercised";
  }
  EXPECT_EQ(accel_state_backend(state), asked);
}

// Rank r holds r + 1 rows of [r, r]: the padding and trimming inside gather run on the GPU too.
TEST(GpuCollectives, GatherOfDifferentRowCountsStaysOnTheGpu) {
  accel_tensor_t* mine = cuda_floats(std::vector<float>(static_cast<size_t>(2 * (rank + 1)), static_cast<float>(rank)),
                                     {rank + 1, 2});
  std::vector<float> expected;
  for (int r = 0; r < world; ++r) expected.insert(expected.end(), static_cast<size_t>(2 * (r + 1)), static_cast<float>(r));
  for (auto collective : {accel_state_gather, accel_state_gather_for_metrics}) {
    accel_tensor_t* all = nullptr;
    ASSERT_EQ(collective(state, mine, &all), ACCEL_OK) << last_error();
    EXPECT_EQ(std::string(accel_tensor_device(all)), accel_state_device(state));
    EXPECT_EQ(accel_tensor_shape(all)[0], world * (world + 1) / 2);
    EXPECT_EQ(values_of(all), expected);
    accel_tensor_free(all);
  }
  accel_tensor_free(mine);
}

TEST(GpuCollectives, ReduceSumMeanMaxOnTheGpu) {
  accel_tensor_t* mine = cuda_floats(reduce_input());
  for (const auto& [reduction, expected] : reduce_cases()) {
    accel_tensor_t* out = nullptr;
    ASSERT_EQ(accel_state_reduce(state, mine, reduction, &out), ACCEL_OK) << last_error();
    EXPECT_EQ(std::string(accel_tensor_device(out)), accel_state_device(state)) << reduction;
    EXPECT_EQ(values_of(out), expected) << reduction;
    accel_tensor_free(out);
  }
  accel_tensor_free(mine);
}

// Four million floats: Gloo stages CUDA tensors through host memory in pieces, NCCL sends them directly.
TEST(GpuCollectives, ALargeSumIsExact) {
  const int64_t n = 1 << 22;
  accel_tensor_t* mine = cuda_floats(std::vector<float>(static_cast<size_t>(n), static_cast<float>(rank + 1)));
  accel_tensor_t* out = nullptr;
  ASSERT_EQ(accel_state_reduce(state, mine, "sum", &out), ACCEL_OK) << last_error();
  EXPECT_EQ(values_of(out), std::vector<float>(static_cast<size_t>(n), static_cast<float>(world * (world + 1) / 2)));
  accel_tensor_free(out);
  accel_tensor_free(mine);
}

TEST(GpuCollectives, BroadcastFromTheLastRankWritesIntoTheSameGpuMemory) {
  accel_tensor_t* mine = cuda_floats(arange(world, 1.0f + static_cast<float>(world * rank)));
  void* before = device_pointer(mine);
  ASSERT_EQ(accel_state_broadcast(state, mine, world - 1), ACCEL_OK) << last_error();
  EXPECT_EQ(device_pointer(mine), before);
  EXPECT_EQ(values_of(mine), arange(world, 1.0f + static_cast<float>(world * (world - 1))));
  accel_tensor_free(mine);
}

TEST(GpuCollectives, PadAcrossProcessesOnTheGpu) {
  accel_tensor_t* mine = cuda_floats(arange(rank == 0 ? world + 1 : world));
  accel_tensor_t* padded = nullptr;
  ASSERT_EQ(accel_state_pad_across_processes(state, mine, 0, -1.0, 0, &padded), ACCEL_OK) << last_error();
  EXPECT_EQ(std::string(accel_tensor_device(padded)), accel_state_device(state));
  auto expected = arange(world + 1);
  if (rank != 0) expected.back() = -1.0f;
  EXPECT_EQ(values_of(padded), expected);
  accel_tensor_free(padded);
  accel_tensor_free(mine);
}

TEST(GpuCollectives, GatherBytesWithAGpuState) {
  const std::string mine(static_cast<size_t>(rank + 1), static_cast<char>('a' + rank));
  accel_bytes_list_t* list = nullptr;
  ASSERT_EQ(accel_state_gather_bytes(state, mine.data(), mine.size(), &list), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_bytes_list_count(list), static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const void* data = nullptr;
    size_t size = 0;
    ASSERT_EQ(accel_bytes_list_get(list, static_cast<size_t>(r), &data, &size), ACCEL_OK);
    EXPECT_EQ(std::string(static_cast<const char*>(data), size), std::string(static_cast<size_t>(r + 1), static_cast<char>('a' + r)));
  }
  accel_bytes_list_free(list);
}

// The shape exchange before a collective travels on the backend's device; a mismatch still fails on
// every rank, naming each shape, and leaves the group usable.
TEST(GpuCollectives, MismatchedShapesFailOnEveryRank) {
  if (world == 1) GTEST_SKIP() << "needs two ranks";
  accel_tensor_t* mine = cuda_floats(arange(rank + 1));
  accel_tensor_t* out = nullptr;
  EXPECT_EQ(accel_state_reduce(state, mine, "sum", &out), ACCEL_ERR_SHAPE_MISMATCH) << last_error();
  for (int r = 0; r < world; ++r) {
    EXPECT_NE(last_error().find("process " + std::to_string(r) + ": [" + std::to_string(r + 1) + "]"), std::string::npos)
        << last_error();
  }
  EXPECT_EQ(accel_state_is_broken(state), 0);
  EXPECT_EQ(accel_state_wait_for_everyone(state), ACCEL_OK) << last_error();
  accel_tensor_free(mine);
}

}  // namespace
