//! capi/accel/version.h: the version this crate was written for, and the loaded library's.
use std::os::raw::{c_char, c_int};

pub const ACCEL_VERSION_MAJOR: c_int = 0;
pub const ACCEL_VERSION_MINOR: c_int = 2;
pub const ACCEL_VERSION_PATCH: c_int = 0;

extern "C" {
    pub fn accel_version_major() -> c_int;
    pub fn accel_version_minor() -> c_int;
    pub fn accel_version_patch() -> c_int;
    pub fn accel_version_string() -> *const c_char;
    pub fn accel_version_torch() -> *const c_char;
    pub fn accel_version_has_feature(name: *const c_char) -> c_int;
    pub fn accel_version_features() -> *const c_char;
}
