//! capi/accel/tensor.h: tensor handles, copies from and to buffers, DLPack exchange.
use std::os::raw::{c_char, c_int, c_void};

use crate::DLManagedTensor;

opaque!(accel_tensor_t);

pub const ACCEL_DTYPE_FLOAT32: i32 = 1;
pub const ACCEL_DTYPE_FLOAT64: i32 = 2;
pub const ACCEL_DTYPE_FLOAT16: i32 = 3;
pub const ACCEL_DTYPE_BFLOAT16: i32 = 4;
pub const ACCEL_DTYPE_INT8: i32 = 5;
pub const ACCEL_DTYPE_INT16: i32 = 6;
pub const ACCEL_DTYPE_INT32: i32 = 7;
pub const ACCEL_DTYPE_INT64: i32 = 8;
pub const ACCEL_DTYPE_UINT8: i32 = 9;
pub const ACCEL_DTYPE_BOOL: i32 = 10;

pub const ACCEL_TENSOR_MAX_DIMS: usize = 64;

extern "C" {
    pub fn accel_tensor_from_dlpack(out: *mut *mut accel_tensor_t, managed: *mut DLManagedTensor) -> c_int;
    pub fn accel_tensor_to_dlpack(out: *mut *mut DLManagedTensor, tensor: *const accel_tensor_t) -> c_int;
    pub fn accel_tensor_from_buffer(
        out: *mut *mut accel_tensor_t,
        data: *const c_void,
        dtype: i32,
        shape: *const i64,
        ndim: usize,
    ) -> c_int;
    pub fn accel_tensor_free(tensor: *mut accel_tensor_t);
    pub fn accel_tensor_ndim(tensor: *const accel_tensor_t) -> usize;
    pub fn accel_tensor_shape(tensor: *const accel_tensor_t) -> *const i64;
    pub fn accel_tensor_numel(tensor: *const accel_tensor_t) -> i64;
    pub fn accel_tensor_dtype(tensor: *const accel_tensor_t) -> i32;
    pub fn accel_tensor_element_size(tensor: *const accel_tensor_t) -> usize;
    pub fn accel_tensor_device(tensor: *const accel_tensor_t) -> *const c_char;
    pub fn accel_tensor_data(tensor: *const accel_tensor_t, out: *mut *mut c_void) -> c_int;
    pub fn accel_tensor_copy_to_buffer(tensor: *const accel_tensor_t, dst: *mut c_void, capacity: usize) -> c_int;
}
