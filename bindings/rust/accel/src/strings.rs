//! Text across the ABI: Rust strings and paths in as NUL-terminated copies, library strings out as owned
//! Strings (the library's own pointers live only until its next call or the handle's end).
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use accel_sys as sys;

use crate::error::{Error, Result};

/// `text` as a C string; a NUL inside it is ACCEL_ERR_INVALID_ARGUMENT naming what it is.
pub(crate) fn to_c(what: &str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::new(sys::ACCEL_ERR_INVALID_ARGUMENT, format!("{} contains a NUL byte: {:?}", what, text)))
}

/// A path's bytes as a C string (Unix paths are bytes, not necessarily UTF-8).
pub(crate) fn path_to_c(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::new(sys::ACCEL_ERR_INVALID_ARGUMENT, format!("path contains a NUL byte: {}", path.display())))
}

/// A copy of a library string; None for NULL.
pub(crate) fn from_c(text: *const c_char) -> Option<String> {
    if text.is_null() {
        None
    } else {
        // SAFETY: the library returns NUL-terminated strings valid until the next call on this thread.
        Some(unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned())
    }
}

/// `from_c` for the strings the library promises never to be NULL (static storage, or "" as fallback).
pub(crate) fn from_c_or_empty(text: *const c_char) -> String {
    from_c(text).unwrap_or_default()
}
