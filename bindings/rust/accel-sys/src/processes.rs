//! capi/accel/processes.h: split_between_processes, main_process_first, send_to_device.
use std::os::raw::c_int;

use crate::{accel_state_t, accel_tensor_t};

extern "C" {
    pub fn accel_state_split_range(
        state: *const accel_state_t,
        length: i64,
        first: *mut i64,
        count: *mut i64,
        padded_count: *mut i64,
    ) -> c_int;
    pub fn accel_state_split_tensor(
        state: *const accel_state_t,
        input: *const accel_tensor_t,
        apply_padding: c_int,
        out: *mut *mut accel_tensor_t,
    ) -> c_int;
    pub fn accel_state_main_process_first_begin(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_main_process_first_end(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_local_main_process_first_begin(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_local_main_process_first_end(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_send_to_device(
        state: *const accel_state_t,
        input: *const accel_tensor_t,
        non_blocking: c_int,
        out: *mut *mut accel_tensor_t,
    ) -> c_int;
}
