// The exception firewall every C entry point goes through: nothing thrown crosses the ABI; each failure
// becomes an ACCEL_ERR_* code and a thread-local message.
#pragma once

#include <c10/util/Exception.h>

#include <new>
#include <string>

#include "accel/common.h"
#include "core/error.hpp"

namespace accel::capi {

int record_error(int code, const std::string& message);

// Throws Error(NullArgument) naming the argument when pointer is NULL.
inline void require(const void* pointer, const char* name) {
  if (pointer == nullptr) fail(Code::NullArgument, std::string("argument '") + name + "' is NULL");
}

template <class Body>
int guarded(const char* function, Body&& body) noexcept {
  const std::string prefix = std::string(function) + ": ";
  try {
    body();
    return ACCEL_OK;
  } catch (const Error& error) {
    return record_error(static_cast<int>(error.code()), prefix + error.what());
  } catch (const c10::Error& error) {
    return record_error(ACCEL_ERR_TORCH, prefix + error.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return record_error(ACCEL_ERR_OUT_OF_MEMORY, prefix + "out of memory");
  } catch (const std::exception& error) {
    return record_error(ACCEL_ERR_INTERNAL, prefix + error.what());
  } catch (...) {
    return record_error(ACCEL_ERR_INTERNAL, prefix + "unknown exception");
  }
}

// For functions with an out-parameter: it is NULL unless the call succeeds.
template <class T, class Body>
int guarded_out(const char* function, T** out, Body&& body) noexcept {
  if (out != nullptr) *out = nullptr;
  return guarded(function, [&] {
    require(out, "out");
    body();
  });
}

}  // namespace accel::capi
