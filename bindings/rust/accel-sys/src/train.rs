//! capi/accel/train.h: the training step (accumulate, backward, clipping) and save_model.
use std::os::raw::{c_char, c_int};

use crate::{accel_model_t, accel_state_t, accel_tensor_t};

extern "C" {
    pub fn accel_state_accumulate(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_sync_gradients(state: *const accel_state_t) -> c_int;
    pub fn accel_state_gradient_accumulation_steps(state: *const accel_state_t) -> i64;
    pub fn accel_state_backward(state: *mut accel_state_t, loss: *const accel_tensor_t) -> c_int;
    pub fn accel_state_backward_with_items(state: *mut accel_state_t, loss: *const accel_tensor_t, num_items: usize) -> c_int;
    pub fn accel_state_no_sync_begin(state: *mut accel_state_t, model: *mut accel_model_t) -> c_int;
    pub fn accel_state_no_sync_end(state: *mut accel_state_t, model: *mut accel_model_t) -> c_int;
    pub fn accel_state_autocast_begin(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_autocast_end(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_free_memory(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_grad_scale(state: *mut accel_state_t, out: *mut *mut accel_tensor_t) -> c_int;
    pub fn accel_state_unscale_gradients(state: *mut accel_state_t, model: *mut accel_model_t, found_inf: *mut c_int) -> c_int;
    pub fn accel_state_update_grad_scale(state: *mut accel_state_t, found_inf: c_int) -> c_int;
    pub fn accel_state_clip_grad_norm(
        state: *mut accel_state_t,
        model: *mut accel_model_t,
        max_norm: f64,
        norm_type: f64,
        total_norm: *mut f64,
    ) -> c_int;
    pub fn accel_state_clip_grad_value(state: *mut accel_state_t, model: *mut accel_model_t, clip_value: f64) -> c_int;
    pub fn accel_state_save_model(
        state: *mut accel_state_t,
        model: *const accel_model_t,
        directory: *const c_char,
        max_shard_size: usize,
    ) -> c_int;
}
