//! capi/accel/train_step.h: a training step as one call (forward, loss, backward, clipping, the optimizer
//! step and zero_grad), run eagerly or captured once as a CUDA graph and replayed.
use std::os::raw::{c_char, c_int};

use crate::{accel_model_t, accel_optimizer_t, accel_options_t, accel_tensor_t};

opaque!(accel_train_step_t);

extern "C" {
    pub fn accel_train_step_new(
        out: *mut *mut accel_train_step_t,
        model: *mut accel_model_t,
        optimizer: *mut accel_optimizer_t,
        options: *const accel_options_t,
    ) -> c_int;
    pub fn accel_train_step_free(step: *mut accel_train_step_t);
    pub fn accel_train_step_run(
        step: *mut accel_train_step_t,
        inputs: *const *mut accel_tensor_t,
        count: usize,
        names: *const *const c_char,
        named_inputs: *const *mut accel_tensor_t,
        named_count: usize,
        target: *const accel_tensor_t,
        loss: *mut *mut accel_tensor_t,
    ) -> c_int;
    pub fn accel_train_step_eager_reason(step: *const accel_train_step_t) -> *const c_char;
    pub fn accel_train_step_stat(step: *const accel_train_step_t, name: *const c_char, out: *mut f64) -> c_int;
}
