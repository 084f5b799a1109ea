//! capi/accel/loss.h: losses computed by the library.
use std::os::raw::{c_char, c_int};

use crate::{accel_options_t, accel_tensor_t};

extern "C" {
    pub fn accel_loss_compute(
        out: *mut *mut accel_tensor_t,
        name: *const c_char,
        input: *const accel_tensor_t,
        target: *const accel_tensor_t,
        options: *const accel_options_t,
    ) -> c_int;
}
