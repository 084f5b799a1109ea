#include "core/error.hpp"

#include <c10/util/Exception.h>

#include <new>

namespace accel {

namespace {

bool contains(const std::string& text, const char* fragment) { return text.find(fragment) != std::string::npos; }

// LibTorch 1.13's CPU allocator reports a failed allocation as a plain c10::Error (only CUDA's has the
// OutOfMemoryError type), so it is recognised by the allocator's own words.
bool is_allocation_failure(const c10::Error& error) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  const std::string& message = error.msg();
  return contains(message, "DefaultCPUAllocator: can't allocate memory") ||
         contains(message, "DefaultCPUAllocator: not enough memory");
}

}  // namespace

std::string message_of(const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) return torch_error->what_without_backtrace();
  return error.what();
}

Code code_of(const std::exception& error, Code otherwise) {
  if (const auto* accel_error = dynamic_cast<const Error*>(&error)) return accel_error->code();
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return Code::OutOfMemory;
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error); torch_error && is_allocation_failure(*torch_error)) {
    return Code::OutOfMemory;
  }
  return otherwise;
}

void fail_from(const std::exception& cause, Code otherwise, const std::string& context) {
  fail(code_of(cause, otherwise), context + message_of(cause));
}

}  // namespace accel
