#include "accel/common.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <new>
#include <string>

#include "shim/guard.hpp"

namespace {

thread_local std::string last_error;
// Set when the message itself could not be stored (no memory); cleared by the next stored message.
thread_local const char* last_error_fallback = nullptr;

}  // namespace

namespace accel::capi {

int record_error(int code, const std::string& message) noexcept {
  try {
    last_error = message;
    last_error_fallback = nullptr;
  } catch (...) {
    last_error_fallback = "accel: out of memory while recording an error message";
  }
  return code;
}

int record_current_exception(const char* function) noexcept {
  try {
    const std::string prefix = std::string(function) + ": ";
    try {
      throw;
    } catch (const Error& error) {
      return record_error(static_cast<int>(error.code()), prefix + error.what());
    } catch (const c10::Error& error) {
      // LibTorch's allocation failures are c10::Errors too: code_of tells them apart.
      return record_error(static_cast<int>(code_of(error, Code::Torch)), prefix + message_of(error));
    } catch (const std::bad_alloc&) {
      return record_error(ACCEL_ERR_OUT_OF_MEMORY, prefix + "out of memory");
    } catch (const std::length_error& error) {
      return record_error(ACCEL_ERR_INVALID_ARGUMENT, prefix + "a size is too large (" + error.what() + ")");
    } catch (const std::exception& error) {
      return record_error(static_cast<int>(code_of(error, Code::Internal)), prefix + message_of(error));
    } catch (...) {
      return record_error(ACCEL_ERR_INTERNAL, prefix + "unknown exception");
    }
  } catch (...) {
    last_error_fallback = "accel: out of memory while recording an error message";
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
}

}  // namespace accel::capi

static_assert(ACCEL_ERR_INVALID_ARGUMENT == static_cast<int>(accel::Code::InvalidArgument));
static_assert(ACCEL_ERR_NULL_ARGUMENT == static_cast<int>(accel::Code::NullArgument));
static_assert(ACCEL_ERR_UNKNOWN_OPTION == static_cast<int>(accel::Code::UnknownOption));
static_assert(ACCEL_ERR_BAD_OPTION_VALUE == static_cast<int>(accel::Code::BadOptionValue));
static_assert(ACCEL_ERR_DTYPE == static_cast<int>(accel::Code::Dtype));
static_assert(ACCEL_ERR_SHAPE_MISMATCH == static_cast<int>(accel::Code::ShapeMismatch));
static_assert(ACCEL_ERR_TIMEOUT == static_cast<int>(accel::Code::Timeout));
static_assert(ACCEL_ERR_PEER_FAILED == static_cast<int>(accel::Code::PeerFailed));
static_assert(ACCEL_ERR_INVALID_STATE == static_cast<int>(accel::Code::InvalidState));
static_assert(ACCEL_ERR_ENVIRONMENT == static_cast<int>(accel::Code::Environment));
static_assert(ACCEL_ERR_IO == static_cast<int>(accel::Code::Io));
static_assert(ACCEL_ERR_CALLBACK == static_cast<int>(accel::Code::Callback));
static_assert(ACCEL_ERR_UNSUPPORTED == static_cast<int>(accel::Code::Unsupported));
static_assert(ACCEL_ERR_OUT_OF_RANGE == static_cast<int>(accel::Code::OutOfRange));
static_assert(ACCEL_ERR_TORCH == static_cast<int>(accel::Code::Torch));
static_assert(ACCEL_ERR_OUT_OF_MEMORY == static_cast<int>(accel::Code::OutOfMemory));
static_assert(ACCEL_ERR_INTERNAL == static_cast<int>(accel::Code::Internal));

using accel::capi::guarded_value;

extern "C" const char* accel_error_last(void) {
  return guarded_value<const char*>(__func__, "", [] {
    return last_error_fallback != nullptr ? last_error_fallback : last_error.c_str();
  });
}

extern "C" const char* accel_error_name(int code) {
  return guarded_value<const char*>(__func__, "ACCEL_ERR_UNKNOWN_CODE", [code]() -> const char* {
    switch (code) {
      case ACCEL_OK: return "ACCEL_OK";
      case ACCEL_ERR_INVALID_ARGUMENT: return "ACCEL_ERR_INVALID_ARGUMENT";
      case ACCEL_ERR_NULL_ARGUMENT: return "ACCEL_ERR_NULL_ARGUMENT";
      case ACCEL_ERR_UNKNOWN_OPTION: return "ACCEL_ERR_UNKNOWN_OPTION";
      case ACCEL_ERR_BAD_OPTION_VALUE: return "ACCEL_ERR_BAD_OPTION_VALUE";
      case ACCEL_ERR_DTYPE: return "ACCEL_ERR_DTYPE";
      case ACCEL_ERR_SHAPE_MISMATCH: return "ACCEL_ERR_SHAPE_MISMATCH";
      case ACCEL_ERR_TIMEOUT: return "ACCEL_ERR_TIMEOUT";
      case ACCEL_ERR_PEER_FAILED: return "ACCEL_ERR_PEER_FAILED";
      case ACCEL_ERR_INVALID_STATE: return "ACCEL_ERR_INVALID_STATE";
      case ACCEL_ERR_ENVIRONMENT: return "ACCEL_ERR_ENVIRONMENT";
      case ACCEL_ERR_IO: return "ACCEL_ERR_IO";
      case ACCEL_ERR_CALLBACK: return "ACCEL_ERR_CALLBACK";
      case ACCEL_ERR_UNSUPPORTED: return "ACCEL_ERR_UNSUPPORTED";
      case ACCEL_ERR_OUT_OF_RANGE: return "ACCEL_ERR_OUT_OF_RANGE";
      case ACCEL_ERR_TORCH: return "ACCEL_ERR_TORCH";
      case ACCEL_ERR_OUT_OF_MEMORY: return "ACCEL_ERR_OUT_OF_MEMORY";
      case ACCEL_ERR_INTERNAL: return "ACCEL_ERR_INTERNAL";
      default: return "ACCEL_ERR_UNKNOWN_CODE";
    }
  });
}

extern "C" void accel_string_free(char* text) {
  accel::capi::guarded(__func__, [text] { std::free(text); });
}
