#include "core/features.hpp"

#include <torch/version.h>

#include <algorithm>
#include <vector>

namespace accel {

namespace {

const std::vector<std::string>& features() {
  static const std::vector<std::string> list{
#ifdef USE_C10D_GLOO
      "gloo",
#endif
#ifdef ACCEL_WITH_NCCL
      "nccl",
#endif
#ifdef ACCEL_WITH_CUDA
      "cuda",
#endif
  };
  return list;
}

}  // namespace

const char* version_string() { return ACCEL_BUILD_VERSION; }

const char* torch_version() { return TORCH_VERSION; }

bool has_feature(const std::string& name) {
  return std::find(features().begin(), features().end(), name) != features().end();
}

const std::string& feature_list() {
  static const std::string joined = [] {
    std::string text;
    for (const auto& feature : features()) text += (text.empty() ? "" : ",") + feature;
    return text;
  }();
  return joined;
}

}  // namespace accel
