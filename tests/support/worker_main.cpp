#include <gtest/gtest.h>

#include <cstdio>

#include "worker.hpp"

#ifdef WORKER_NEEDS_CUDA
#include "../gpu/cuda_present.hpp"
#endif

namespace worker {

accel_state_t* state = nullptr;
int32_t rank = 0;
int32_t world = 1;

accel_tensor_t* floats(const std::vector<float>& values, std::vector<int64_t> shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  accel_tensor_t* tensor = nullptr;
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, values.data(), ACCEL_DTYPE_FLOAT32, shape.data(), shape.size()), ACCEL_OK)
      << accel_error_last();
  return tensor;
}

template <class T>
std::vector<T> values_of(const accel_tensor_t* tensor) {
  std::vector<T> values(static_cast<size_t>(accel_tensor_numel(tensor)));
  EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, values.data(), values.size() * sizeof(T)), ACCEL_OK) << accel_error_last();
  return values;
}

std::vector<float> float_values(const accel_tensor_t* tensor) { return values_of<float>(tensor); }
std::vector<int64_t> long_values(const accel_tensor_t* tensor) { return values_of<int64_t>(tensor); }

std::vector<float> arange(int64_t n, float start) {
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) values.push_back(start + static_cast<float>(i));
  return values;
}

std::vector<float> reduce_input() { return {static_cast<float>(2 * rank + 1), static_cast<float>(2 * rank + 2)}; }

std::vector<std::pair<const char*, std::vector<float>>> reduce_cases() {
  float sum0 = 0, sum1 = 0;
  for (int r = 0; r < world; ++r) {
    sum0 += static_cast<float>(2 * r + 1);
    sum1 += static_cast<float>(2 * r + 2);
  }
  return {
      {"sum", {sum0, sum1}},
      {"mean", {sum0 / static_cast<float>(world), sum1 / static_cast<float>(world)}},
      {"max", {static_cast<float>(2 * world - 1), static_cast<float>(2 * world)}},
  };
}

}  // namespace worker

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
#ifdef WORKER_NEEDS_CUDA
  // Before the state: on a host without a GPU the whole worker is skipped, not each of its tests.
  if (gpu::worker_skipped_without_cuda()) return gpu::kSkipExitCode;
#endif
  if (accel_state_new(&worker::state, nullptr) != ACCEL_OK) {
    std::fprintf(stderr, "accel_state_new: %s\n", accel_error_last());
    return 1;
  }
  worker::rank = accel_state_process_index(worker::state);
  worker::world = accel_state_num_processes(worker::state);
  const int result = RUN_ALL_TESTS();
  if (accel_state_shutdown(worker::state) != ACCEL_OK) {
    std::fprintf(stderr, "accel_state_shutdown: %s\n", accel_error_last());
    return 1;
  }
  accel_state_free(worker::state);
  return result;
}
