//! capi/accel/scheduler.h: learning-rate schedulers, named or driven by a callback.
use std::os::raw::{c_char, c_int, c_void};

use crate::{accel_optimizer_t, accel_options_t};

opaque!(accel_scheduler_t);

extern "C" {
    pub fn accel_scheduler_new(
        out: *mut *mut accel_scheduler_t,
        optimizer: *mut accel_optimizer_t,
        name: *const c_char,
        options: *const accel_options_t,
    ) -> c_int;
}

pub type accel_lr_multiplier_fn = Option<unsafe extern "C" fn(step: i64, multiplier: *mut f64, payload: *mut c_void) -> c_int>;

extern "C" {
    pub fn accel_scheduler_from_callback(
        out: *mut *mut accel_scheduler_t,
        optimizer: *mut accel_optimizer_t,
        multiplier: accel_lr_multiplier_fn,
        payload: *mut c_void,
    ) -> c_int;
    pub fn accel_scheduler_free(scheduler: *mut accel_scheduler_t);
    pub fn accel_scheduler_step(scheduler: *mut accel_scheduler_t) -> c_int;
    pub fn accel_scheduler_step_with_metric(scheduler: *mut accel_scheduler_t, metric: f64) -> c_int;
    pub fn accel_scheduler_last_lr(scheduler: *const accel_scheduler_t, group: usize, out: *mut f64) -> c_int;
    pub fn accel_scheduler_step_count(scheduler: *const accel_scheduler_t) -> i64;
}
