//! capi/accel/state.h: the process state (Accelerate's Accelerator).
use std::os::raw::{c_char, c_int};

use crate::accel_options_t;

opaque!(accel_state_t);

pub const ACCEL_DISTRIBUTED_NO: c_int = 0;
pub const ACCEL_DISTRIBUTED_MULTI_CPU: c_int = 1;
pub const ACCEL_DISTRIBUTED_MULTI_GPU: c_int = 2;

extern "C" {
    pub fn accel_state_new(out: *mut *mut accel_state_t, options: *const accel_options_t) -> c_int;
    pub fn accel_state_free(state: *mut accel_state_t);
    pub fn accel_state_shutdown(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_reset(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_wait_for_everyone(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_set_seed(state: *mut accel_state_t, seed: u64, device_specific: c_int) -> c_int;
    pub fn accel_state_num_processes(state: *const accel_state_t) -> i32;
    pub fn accel_state_process_index(state: *const accel_state_t) -> i32;
    pub fn accel_state_local_process_index(state: *const accel_state_t) -> i32;
    pub fn accel_state_num_local_processes(state: *const accel_state_t) -> i32;
    pub fn accel_state_is_main_process(state: *const accel_state_t) -> c_int;
    pub fn accel_state_is_local_main_process(state: *const accel_state_t) -> c_int;
    pub fn accel_state_is_last_process(state: *const accel_state_t) -> c_int;
    pub fn accel_state_distributed_type(state: *const accel_state_t) -> c_int;
    pub fn accel_state_distributed_type_name(state: *const accel_state_t) -> *const c_char;
    pub fn accel_state_device(state: *const accel_state_t) -> *const c_char;
    pub fn accel_state_mixed_precision(state: *const accel_state_t) -> *const c_char;
    pub fn accel_state_backend(state: *const accel_state_t) -> *const c_char;
    pub fn accel_state_is_broken(state: *const accel_state_t) -> c_int;
}
