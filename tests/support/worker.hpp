// Shared by the multi-process GoogleTest workers: every rank runs the same tests, in the same order,
// against one state created by worker_main.cpp.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "accel.h"

namespace worker {

extern accel_state_t* state;
extern int32_t rank;
extern int32_t world;

accel_tensor_t* floats(const std::vector<float>& values, std::vector<int64_t> shape = {});
std::vector<float> float_values(const accel_tensor_t* tensor);
std::vector<int64_t> long_values(const accel_tensor_t* tensor);
std::vector<float> arange(int64_t n, float start = 0);

// The reduce tests' data: this rank's two values, and what "sum", "mean" and "max" over every rank give.
std::vector<float> reduce_input();
std::vector<std::pair<const char*, std::vector<float>>> reduce_cases();

}  // namespace worker
