#include "accel/common.h"

#include <string>

#include "shim/guard.hpp"

namespace {
thread_local std::string last_error;
}

namespace accel::capi {

int record_error(int code, const std::string& message) {
  last_error = message;
  return code;
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

extern "C" const char* accel_error_last(void) { return last_error.c_str(); }

extern "C" const char* accel_error_name(int code) {
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
}
