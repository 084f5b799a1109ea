//! Making a handle through an out-parameter, the way every constructor of the C ABI does.
use std::os::raw::c_int;
use std::ptr::{self, NonNull};

use accel_sys as sys;

use crate::error::{check, Error, Result};

/// Runs a call that writes a new handle to its out-parameter, and takes the handle when it succeeds.
pub(crate) fn new_handle<T>(call: impl FnOnce(*mut *mut T) -> c_int) -> Result<NonNull<T>> {
    let mut out = ptr::null_mut();
    check(call(&mut out))?;
    NonNull::new(out).ok_or_else(|| Error::new(sys::ACCEL_ERR_INTERNAL, "the library reported success but returned no handle"))
}
