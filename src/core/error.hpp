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

// The message of any exception. LibTorch's c10::Error::what() ends with a C++ backtrace (one line per
// frame), which is noise in an error a user reads, so its message is taken without it.
std::string message_of(const std::exception& error);

// The code that says what happened: an Error's own code; OutOfMemory for a failed allocation
// (std::bad_alloc, LibTorch's allocators); `otherwise` for anything else.
Code code_of(const std::exception& error, Code otherwise);

// Throws Error(code_of(cause, otherwise), context + message_of(cause)): how a LibTorch or standard
// exception caught in the core becomes an accel::Error.
[[noreturn]] void fail_from(const std::exception& cause, Code otherwise, const std::string& context);

}  // namespace accel
