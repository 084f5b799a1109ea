//! capi/accel/model.h: TorchScript models and models of the caller's tensors, prepare(model), forward and
//! its outputs, the caller's forward and backward.
use std::os::raw::{c_char, c_int, c_void};

use crate::{accel_options_t, accel_state_t, accel_tensor_t};

opaque!(accel_model_t);
opaque!(accel_output_t);

extern "C" {
    pub fn accel_model_load(out: *mut *mut accel_model_t, path: *const c_char) -> c_int;
    pub fn accel_model_load_buffer(out: *mut *mut accel_model_t, data: *const c_void, size: usize) -> c_int;
    pub fn accel_model_from_tensors(
        out: *mut *mut accel_model_t,
        names: *const *const c_char,
        parameters: *const *mut accel_tensor_t,
        trainable: *const c_int,
        count: usize,
        buffer_names: *const *const c_char,
        buffers: *const *mut accel_tensor_t,
        buffer_count: usize,
    ) -> c_int;
    pub fn accel_model_free(model: *mut accel_model_t);
    pub fn accel_state_prepare_model(state: *mut accel_state_t, model: *mut accel_model_t, options: *const accel_options_t) -> c_int;
    pub fn accel_model_forward(
        model: *mut accel_model_t,
        inputs: *const *mut accel_tensor_t,
        count: usize,
        names: *const *const c_char,
        named_inputs: *const *mut accel_tensor_t,
        named_count: usize,
        out: *mut *mut accel_output_t,
    ) -> c_int;
    pub fn accel_model_evaluate(
        model: *mut accel_model_t,
        inputs: *const *mut accel_tensor_t,
        count: usize,
        names: *const *const c_char,
        named_inputs: *const *mut accel_tensor_t,
        named_count: usize,
        out: *mut *mut accel_output_t,
    ) -> c_int;
    pub fn accel_model_begin_forward(model: *mut accel_model_t, grad_enabled: c_int) -> c_int;
    pub fn accel_model_grad_view(model: *const accel_model_t, index: usize, out: *mut *mut accel_tensor_t) -> c_int;
    pub fn accel_model_grad_ready(model: *mut accel_model_t, index: usize) -> c_int;
    pub fn accel_model_end_backward(model: *mut accel_model_t) -> c_int;
    pub fn accel_model_grad_reached_by_no_rank(model: *const accel_model_t, index: usize, out: *mut c_int) -> c_int;
    pub fn accel_output_count(output: *const accel_output_t) -> usize;
    pub fn accel_output_name(output: *const accel_output_t, index: usize) -> *const c_char;
    pub fn accel_output_get(output: *const accel_output_t, index: usize, out: *mut *mut accel_tensor_t) -> c_int;
    pub fn accel_output_get_named(output: *const accel_output_t, name: *const c_char, out: *mut *mut accel_tensor_t) -> c_int;
    pub fn accel_output_free(output: *mut accel_output_t);
    pub fn accel_model_train(model: *mut accel_model_t, on: c_int) -> c_int;
    pub fn accel_model_is_training(model: *const accel_model_t) -> c_int;
    pub fn accel_model_num_parameters(model: *const accel_model_t) -> usize;
    pub fn accel_model_parameter_name(model: *const accel_model_t, index: usize) -> *const c_char;
    pub fn accel_model_parameter(model: *const accel_model_t, index: usize, out: *mut *mut accel_tensor_t) -> c_int;
    pub fn accel_model_num_buffers(model: *const accel_model_t) -> usize;
    pub fn accel_model_buffer_name(model: *const accel_model_t, index: usize) -> *const c_char;
    pub fn accel_model_buffer(model: *const accel_model_t, index: usize, out: *mut *mut accel_tensor_t) -> c_int;
    pub fn accel_model_grad_sync_stat(model: *const accel_model_t, name: *const c_char, out: *mut f64) -> c_int;
    pub fn accel_model_unwrap(model: *const accel_model_t, out: *mut *mut accel_model_t) -> c_int;
    pub fn accel_model_save_torchscript(model: *const accel_model_t, path: *const c_char) -> c_int;
    pub fn accel_model_load_weights(model: *mut accel_model_t, directory: *const c_char) -> c_int;
}
