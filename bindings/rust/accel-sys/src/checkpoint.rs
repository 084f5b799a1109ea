//! capi/accel/checkpoint.h: register_for_checkpointing, save_state (blocking or in the background) and load_state.
use std::os::raw::{c_char, c_int, c_void};

use crate::{accel_loader_t, accel_model_t, accel_optimizer_t, accel_scheduler_t, accel_state_t};

opaque!(accel_sink_t);

extern "C" {
    pub fn accel_sink_write(sink: *mut accel_sink_t, data: *const c_void, size: usize) -> c_int;
}

pub type accel_save_object_fn = Option<unsafe extern "C" fn(sink: *mut accel_sink_t, payload: *mut c_void) -> c_int>;
pub type accel_load_object_fn = Option<unsafe extern "C" fn(data: *const c_void, size: usize, payload: *mut c_void) -> c_int>;

extern "C" {
    pub fn accel_state_register_for_checkpointing(
        state: *mut accel_state_t,
        name: *const c_char,
        save: accel_save_object_fn,
        load: accel_load_object_fn,
        payload: *mut c_void,
    ) -> c_int;
    pub fn accel_state_save_state(
        state: *mut accel_state_t,
        directory: *const c_char,
        models: *const *mut accel_model_t,
        num_models: usize,
        optimizers: *const *mut accel_optimizer_t,
        num_optimizers: usize,
        schedulers: *const *mut accel_scheduler_t,
        num_schedulers: usize,
        loaders: *const *mut accel_loader_t,
        num_loaders: usize,
    ) -> c_int;
    pub fn accel_state_save_state_async(
        state: *mut accel_state_t,
        directory: *const c_char,
        models: *const *mut accel_model_t,
        num_models: usize,
        optimizers: *const *mut accel_optimizer_t,
        num_optimizers: usize,
        schedulers: *const *mut accel_scheduler_t,
        num_schedulers: usize,
        loaders: *const *mut accel_loader_t,
        num_loaders: usize,
    ) -> c_int;
    pub fn accel_state_wait_for_save(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_load_state(
        state: *mut accel_state_t,
        directory: *const c_char,
        models: *const *mut accel_model_t,
        num_models: usize,
        optimizers: *const *mut accel_optimizer_t,
        num_optimizers: usize,
        schedulers: *const *mut accel_scheduler_t,
        num_schedulers: usize,
        loaders: *const *mut accel_loader_t,
        num_loaders: usize,
    ) -> c_int;
    pub fn accel_state_checkpoint_iteration(state: *const accel_state_t) -> i64;
    pub fn accel_state_set_checkpoint_iteration(state: *mut accel_state_t, iteration: i64) -> c_int;
}
