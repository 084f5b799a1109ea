//! capi/accel/loader.h: datasets (tensors, callbacks, iterables, files) and prepared data loaders.
use std::os::raw::{c_char, c_int, c_void};

use crate::{accel_options_t, accel_state_t, accel_tensor_t};

opaque!(accel_dataset_t);
opaque!(accel_loader_t);
opaque!(accel_batch_t);
opaque!(accel_sample_t);

extern "C" {
    pub fn accel_dataset_from_tensors(
        out: *mut *mut accel_dataset_t,
        names: *const *const c_char,
        tensors: *const *mut accel_tensor_t,
        count: usize,
    ) -> c_int;
}

pub type accel_get_item_fn = Option<unsafe extern "C" fn(index: i64, sample: *mut accel_sample_t, payload: *mut c_void) -> c_int>;

extern "C" {
    pub fn accel_dataset_from_callback(
        out: *mut *mut accel_dataset_t,
        length: i64,
        get_item: accel_get_item_fn,
        payload: *mut c_void,
    ) -> c_int;
    pub fn accel_sample_add(sample: *mut accel_sample_t, name: *const c_char, tensor: *const accel_tensor_t) -> c_int;
}

pub type accel_start_epoch_fn = Option<unsafe extern "C" fn(epoch: i64, payload: *mut c_void) -> c_int>;
pub type accel_next_item_fn = Option<unsafe extern "C" fn(sample: *mut accel_sample_t, end: *mut c_int, payload: *mut c_void) -> c_int>;

extern "C" {
    pub fn accel_dataset_from_iterable(
        out: *mut *mut accel_dataset_t,
        start_epoch: accel_start_epoch_fn,
        next_item: accel_next_item_fn,
        payload: *mut c_void,
    ) -> c_int;
    pub fn accel_dataset_from_safetensors(out: *mut *mut accel_dataset_t, path: *const c_char) -> c_int;
    pub fn accel_dataset_from_npy(
        out: *mut *mut accel_dataset_t,
        names: *const *const c_char,
        paths: *const *const c_char,
        count: usize,
    ) -> c_int;
    pub fn accel_dataset_length(dataset: *const accel_dataset_t) -> i64;
    pub fn accel_dataset_free(dataset: *mut accel_dataset_t);
    pub fn accel_loader_new(
        out: *mut *mut accel_loader_t,
        state: *mut accel_state_t,
        dataset: *mut accel_dataset_t,
        options: *const accel_options_t,
    ) -> c_int;
    pub fn accel_loader_new_with_batches(
        out: *mut *mut accel_loader_t,
        state: *mut accel_state_t,
        dataset: *mut accel_dataset_t,
        indices: *const i64,
        batch_sizes: *const usize,
        num_batches: usize,
        options: *const accel_options_t,
    ) -> c_int;
    pub fn accel_loader_free(loader: *mut accel_loader_t);
    pub fn accel_loader_next(loader: *mut accel_loader_t, out: *mut *mut accel_batch_t) -> c_int;
    pub fn accel_loader_length(loader: *const accel_loader_t, out: *mut i64) -> c_int;
    pub fn accel_loader_end_of_dataloader(loader: *const accel_loader_t) -> c_int;
    pub fn accel_loader_remainder(loader: *const accel_loader_t) -> i64;
    pub fn accel_loader_epoch(loader: *const accel_loader_t) -> i64;
    pub fn accel_loader_set_epoch(loader: *mut accel_loader_t, epoch: i64) -> c_int;
    pub fn accel_loader_skip_first_batches(loader: *mut accel_loader_t, n: i64) -> c_int;
    pub fn accel_loader_save_state(loader: *mut accel_loader_t, data: *mut *const c_void, size: *mut usize) -> c_int;
    pub fn accel_loader_load_state(loader: *mut accel_loader_t, data: *const c_void, size: usize) -> c_int;
    pub fn accel_batch_count(batch: *const accel_batch_t) -> usize;
    pub fn accel_batch_name(batch: *const accel_batch_t, index: usize) -> *const c_char;
    pub fn accel_batch_get(batch: *const accel_batch_t, name: *const c_char, out: *mut *mut accel_tensor_t) -> c_int;
    pub fn accel_batch_free(batch: *mut accel_batch_t);
}
