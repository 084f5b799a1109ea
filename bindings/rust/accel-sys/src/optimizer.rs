//! capi/accel/optimizer.h: accelerated optimizers (sgd, adam, adamw).
use std::os::raw::{c_char, c_int};

use crate::{accel_model_t, accel_options_t};

opaque!(accel_optimizer_t);

extern "C" {
    pub fn accel_optimizer_new(
        out: *mut *mut accel_optimizer_t,
        model: *mut accel_model_t,
        kind: *const c_char,
        options: *const accel_options_t,
    ) -> c_int;
    pub fn accel_optimizer_free(optimizer: *mut accel_optimizer_t);
    pub fn accel_optimizer_step(optimizer: *mut accel_optimizer_t) -> c_int;
    pub fn accel_optimizer_zero_grad(optimizer: *mut accel_optimizer_t) -> c_int;
    pub fn accel_optimizer_step_was_skipped(optimizer: *const accel_optimizer_t) -> c_int;
    pub fn accel_optimizer_num_groups(optimizer: *const accel_optimizer_t) -> usize;
    pub fn accel_optimizer_lr(optimizer: *const accel_optimizer_t, group: usize, out: *mut f64) -> c_int;
    pub fn accel_optimizer_set_lr(optimizer: *mut accel_optimizer_t, group: usize, lr: f64) -> c_int;
    pub fn accel_optimizer_momentum(optimizer: *const accel_optimizer_t, group: usize, out: *mut f64) -> c_int;
    pub fn accel_optimizer_betas(optimizer: *const accel_optimizer_t, group: usize, beta1: *mut f64, beta2: *mut f64) -> c_int;
    pub fn accel_optimizer_loss_scale(optimizer: *const accel_optimizer_t, out: *mut f64) -> c_int;
}
