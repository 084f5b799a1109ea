//! capi/accel/tracking.h: trackers (JSONL, CSV, TensorBoard), printing and the progress bar.
use std::os::raw::{c_char, c_int};

use crate::{accel_options_t, accel_state_t};

opaque!(accel_progress_t);

extern "C" {
    pub fn accel_state_init_trackers(
        state: *mut accel_state_t,
        project_dir: *const c_char,
        run_name: *const c_char,
        config_json: *const c_char,
        options: *const accel_options_t,
    ) -> c_int;
    pub fn accel_state_log(state: *mut accel_state_t, names: *const *const c_char, values: *const f64, count: usize, step: i64) -> c_int;
    pub fn accel_state_finish_trackers(state: *mut accel_state_t) -> c_int;
    pub fn accel_state_print(state: *const accel_state_t, text: *const c_char) -> c_int;
    pub fn accel_progress_new(
        out: *mut *mut accel_progress_t,
        state: *const accel_state_t,
        total: i64,
        description: *const c_char,
    ) -> c_int;
    pub fn accel_progress_update(progress: *mut accel_progress_t, steps: i64, loss: f64) -> c_int;
    pub fn accel_progress_free(progress: *mut accel_progress_t);
}
