//! capi/accel/collectives.h: gather, reduce, broadcast, padding and gather_for_metrics across processes.
use std::os::raw::{c_char, c_int, c_void};

use crate::{accel_state_t, accel_tensor_t};

opaque!(accel_bytes_list_t);

extern "C" {
    pub fn accel_state_gather(state: *mut accel_state_t, input: *const accel_tensor_t, out: *mut *mut accel_tensor_t) -> c_int;
    pub fn accel_state_gather_bytes(
        state: *mut accel_state_t,
        data: *const c_void,
        size: usize,
        out: *mut *mut accel_bytes_list_t,
    ) -> c_int;
    pub fn accel_bytes_list_count(list: *const accel_bytes_list_t) -> usize;
    pub fn accel_bytes_list_get(list: *const accel_bytes_list_t, index: usize, data: *mut *const c_void, size: *mut usize) -> c_int;
    pub fn accel_bytes_list_free(list: *mut accel_bytes_list_t);
    pub fn accel_state_reduce(
        state: *mut accel_state_t,
        input: *const accel_tensor_t,
        reduction: *const c_char,
        out: *mut *mut accel_tensor_t,
    ) -> c_int;
    pub fn accel_state_reduce_named(
        state: *mut accel_state_t,
        names: *const *const c_char,
        inputs: *const *mut accel_tensor_t,
        count: usize,
        reduction: *const c_char,
        outputs: *mut *mut accel_tensor_t,
    ) -> c_int;
    pub fn accel_state_broadcast(state: *mut accel_state_t, tensor: *mut accel_tensor_t, from_process: i32) -> c_int;
    pub fn accel_state_reduce_scatter(
        state: *mut accel_state_t,
        input: *const accel_tensor_t,
        reduction: *const c_char,
        output: *mut accel_tensor_t,
    ) -> c_int;
    pub fn accel_state_all_gather(state: *mut accel_state_t, input: *const accel_tensor_t, output: *mut accel_tensor_t) -> c_int;
    pub fn accel_state_pad_across_processes(
        state: *mut accel_state_t,
        input: *const accel_tensor_t,
        dim: i64,
        pad_value: f64,
        pad_first: c_int,
        out: *mut *mut accel_tensor_t,
    ) -> c_int;
    pub fn accel_state_gather_for_metrics(state: *mut accel_state_t, input: *const accel_tensor_t, out: *mut *mut accel_tensor_t) -> c_int;
}
