// What this build of accel contains: the LibTorch it was built against and the compiled-in backends.
// Header-only LibTorch knowledge (no LibTorch library), so that the CLI can report it too.
#pragma once

#include <string>

namespace accel {

// accel's own version, "MAJOR.MINOR.PATCH" (the build passes the numbers of capi/accel/version.h).
const char* version_string();
// e.g. "1.13.0".
const char* torch_version();
// name is "gloo", "nccl" or "cuda".
bool has_feature(const std::string& name);
// Comma-separated, e.g. "gloo".
const std::string& feature_list();

}  // namespace accel
