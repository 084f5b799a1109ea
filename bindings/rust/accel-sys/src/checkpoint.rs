//! capi/accel/checkpoint.h: save_state and load_state.
use std::os::raw::{c_char, c_int};

use crate::{accel_loader_t, accel_model_t, accel_optimizer_t, accel_scheduler_t, accel_state_t};

extern "C" {
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
}
