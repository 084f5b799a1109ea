#include "accel/version.h"

#include "core/features.hpp"
#include "shim/guard.hpp"

using accel::capi::guarded_value;

extern "C" int accel_version_major(void) {
  return guarded_value<int>(__func__, ACCEL_VERSION_MAJOR, [] { return ACCEL_VERSION_MAJOR; });
}
extern "C" int accel_version_minor(void) {
  return guarded_value<int>(__func__, ACCEL_VERSION_MINOR, [] { return ACCEL_VERSION_MINOR; });
}
extern "C" int accel_version_patch(void) {
  return guarded_value<int>(__func__, ACCEL_VERSION_PATCH, [] { return ACCEL_VERSION_PATCH; });
}
extern "C" const char* accel_version_string(void) {
  return guarded_value<const char*>(__func__, ACCEL_VERSION_STRING, [] { return ACCEL_VERSION_STRING; });
}
extern "C" const char* accel_version_torch(void) {
  return guarded_value<const char*>(__func__, "", [] { return accel::torch_version(); });
}
extern "C" int accel_version_has_feature(const char* name) {
  return guarded_value<int>(__func__, 0, [name] { return name != nullptr && accel::has_feature(name); });
}
extern "C" const char* accel_version_features(void) {
  return guarded_value<const char*>(__func__, "", [] { return accel::feature_list().c_str(); });
}
