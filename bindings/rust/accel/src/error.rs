//! Errors: the code a failed call returned (one of `sys::ACCEL_ERR_*`) and the library's message.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

use accel_sys as sys;

/// A failed accel call: its `ACCEL_ERR_*` code (pinned forever, see capi/accel/common.h) and the message
/// the library gave (`accel_error_last`), read on the failing thread right after the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: i32,
    message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

/// What a callback (a dataset's items, a scheduler's multiplier) returns: any error, which the accel call
/// that ran the callback then reports inside its ACCEL_ERR_CALLBACK error.
pub type CallbackResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

impl Error {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }

    /// The error of the call that just returned `code` on this thread.
    fn last(code: c_int) -> Error {
        // SAFETY: accel_error_last never returns NULL; the text is copied before the next accel call.
        let message = unsafe { CStr::from_ptr(sys::accel_error_last()) }.to_string_lossy().into_owned();
        Error { code, message }
    }

    /// The `ACCEL_ERR_*` code, e.g. `sys::ACCEL_ERR_TIMEOUT`.
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The code's symbolic name, e.g. "ACCEL_ERR_TIMEOUT".
    pub fn name(&self) -> &'static str {
        // SAFETY: accel_error_name returns static storage, never NULL.
        unsafe { CStr::from_ptr(sys::accel_error_name(self.code)) }.to_str().unwrap_or("ACCEL_ERR_UNKNOWN_CODE")
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with what a callback reported appended to the library's message.
    pub(crate) fn caused_by(self, cause: &str) -> Error {
        Error { code: self.code, message: format!("{}: {}", self.message, cause) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// Ok for ACCEL_OK, else the error with the library's message.
pub(crate) fn check(code: c_int) -> Result<()> {
    if code == sys::ACCEL_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}
