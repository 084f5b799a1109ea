//! capi/accel/common.h: error codes, the last error message, strings handed to the caller.
use std::os::raw::{c_char, c_int};

pub const ACCEL_OK: c_int = 0;
pub const ACCEL_ERR_INVALID_ARGUMENT: c_int = -1;
pub const ACCEL_ERR_NULL_ARGUMENT: c_int = -2;
pub const ACCEL_ERR_UNKNOWN_OPTION: c_int = -3;
pub const ACCEL_ERR_BAD_OPTION_VALUE: c_int = -4;
pub const ACCEL_ERR_DTYPE: c_int = -5;
pub const ACCEL_ERR_SHAPE_MISMATCH: c_int = -6;
pub const ACCEL_ERR_TIMEOUT: c_int = -7;
pub const ACCEL_ERR_PEER_FAILED: c_int = -8;
pub const ACCEL_ERR_INVALID_STATE: c_int = -9;
pub const ACCEL_ERR_ENVIRONMENT: c_int = -10;
pub const ACCEL_ERR_IO: c_int = -11;
pub const ACCEL_ERR_CALLBACK: c_int = -12;
pub const ACCEL_ERR_UNSUPPORTED: c_int = -13;
pub const ACCEL_ERR_OUT_OF_RANGE: c_int = -14;
pub const ACCEL_ERR_TORCH: c_int = -15;
pub const ACCEL_ERR_OUT_OF_MEMORY: c_int = -16;
pub const ACCEL_ERR_INTERNAL: c_int = -17;

extern "C" {
    pub fn accel_error_last() -> *const c_char;
    pub fn accel_error_name(code: c_int) -> *const c_char;
    pub fn accel_string_free(text: *mut c_char);
}
