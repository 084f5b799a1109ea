#include "accel/version.h"

#include <torch/version.h>

#include <cstring>
#include <string>

extern "C" int accel_version_major(void) { return ACCEL_VERSION_MAJOR; }
extern "C" int accel_version_minor(void) { return ACCEL_VERSION_MINOR; }
extern "C" int accel_version_patch(void) { return ACCEL_VERSION_PATCH; }
extern "C" const char* accel_version_string(void) { return ACCEL_VERSION_STRING; }
extern "C" const char* accel_torch_version(void) { return TORCH_VERSION; }

namespace {
constexpr const char* kFeatures[] = {
#ifdef USE_C10D_GLOO
    "gloo",
#endif
#ifdef ACCEL_WITH_NCCL
    "nccl",
#endif
#ifdef ACCEL_WITH_CUDA
    "cuda",
#endif
    nullptr,
};
}  // namespace

extern "C" int accel_has_feature(const char* name) {
  if (name == nullptr) return 0;
  for (const char* const* feature = kFeatures; *feature != nullptr; ++feature) {
    if (std::strcmp(*feature, name) == 0) return 1;
  }
  return 0;
}

extern "C" const char* accel_features(void) {
  static const std::string list = [] {
    std::string joined;
    for (const char* const* feature = kFeatures; *feature != nullptr; ++feature) {
      joined += (joined.empty() ? "" : ",") + std::string(*feature);
    }
    return joined;
  }();
  return list.c_str();
}
