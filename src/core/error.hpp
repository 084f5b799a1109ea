// The exception type of the whole core. capi maps Code to the pinned ACCEL_ERR_* values.
#pragma once

#include <stdexcept>
#include <string>

namespace accel {

enum class Code : int {
  InvalidArgument = -1,
  NullArgument = -2,
  UnknownOption = -3,
  BadOptionValue = -4,
  Dtype = -5,
  ShapeMismatch = -6,
  Timeout = -7,
  PeerFailed = -8,
  InvalidState = -9,
  Environment = -10,
  Io = -11,
  Callback = -12,
  Unsupported = -13,
  OutOfRange = -14,
  Torch = -15,
  OutOfMemory = -16,
  Internal = -17,
};

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const noexcept { return code_; }

 private:
  Code code_;
};

[[noreturn]] inline void fail(Code code, const std::string& message) { throw Error(code, message); }

// Throws Error(InvalidArgument) with `message` unless `ok`.
inline void require_argument(bool ok, const std::string& message) {
  if (!ok) fail(Code::InvalidArgument, message);
}

}  // namespace accel
