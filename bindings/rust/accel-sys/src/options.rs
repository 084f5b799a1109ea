//! capi/accel/options.h: the options object handed to constructors.
use std::os::raw::{c_char, c_int};

opaque!(accel_options_t);

extern "C" {
    pub fn accel_options_new(out: *mut *mut accel_options_t) -> c_int;
    pub fn accel_options_free(options: *mut accel_options_t);
    pub fn accel_options_set_bool(options: *mut accel_options_t, key: *const c_char, value: c_int) -> c_int;
    pub fn accel_options_set_int(options: *mut accel_options_t, key: *const c_char, value: i64) -> c_int;
    pub fn accel_options_set_double(options: *mut accel_options_t, key: *const c_char, value: f64) -> c_int;
    pub fn accel_options_set_string(options: *mut accel_options_t, key: *const c_char, value: *const c_char) -> c_int;
    pub fn accel_options_set(options: *mut accel_options_t, key: *const c_char, value: *const c_char) -> c_int;
    pub fn accel_options_dump(options: *const accel_options_t, out: *mut *mut c_char) -> c_int;
}
