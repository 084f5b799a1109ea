//! Options: the key/value settings handed to constructors (keys and defaults: capi/accel/options.h).
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

use accel_sys as sys;

use crate::error::{check, Result};
use crate::handle::new_handle;
use crate::strings::{from_c_or_empty, to_c};

/// An options object. Setters take `&mut self`; the header lets constructors read one object from
/// several threads at once, hence `Sync`.
pub struct Options {
    ptr: NonNull<sys::accel_options_t>,
}

// SAFETY: options.h: may be read from several threads at once; setters (here `&mut self`) must not race.
unsafe impl Send for Options {}
unsafe impl Sync for Options {}

impl Options {
    /// An empty object: every key at its default.
    pub fn new() -> Result<Options> {
        let ptr = new_handle(|out| unsafe { sys::accel_options_new(out) })?;
        Ok(Options { ptr })
    }

    /// An object with each key set from its text form ("32", "true", "bf16"), in order.
    pub fn from_text(pairs: &[(&str, &str)]) -> Result<Options> {
        let mut options = Options::new()?;
        for (key, value) in pairs {
            options.set_text(key, value)?;
        }
        Ok(options)
    }

    pub fn set_bool(&mut self, key: &str, value: bool) -> Result<&mut Options> {
        let key = to_c("option key", key)?;
        check(unsafe { sys::accel_options_set_bool(self.ptr.as_ptr(), key.as_ptr(), value as i32) })?;
        Ok(self)
    }

    pub fn set_int(&mut self, key: &str, value: i64) -> Result<&mut Options> {
        let key = to_c("option key", key)?;
        check(unsafe { sys::accel_options_set_int(self.ptr.as_ptr(), key.as_ptr(), value) })?;
        Ok(self)
    }

    pub fn set_double(&mut self, key: &str, value: f64) -> Result<&mut Options> {
        let key = to_c("option key", key)?;
        check(unsafe { sys::accel_options_set_double(self.ptr.as_ptr(), key.as_ptr(), value) })?;
        Ok(self)
    }

    pub fn set_string(&mut self, key: &str, value: &str) -> Result<&mut Options> {
        let (key, value) = (to_c("option key", key)?, to_c("option value", value)?);
        check(unsafe { sys::accel_options_set_string(self.ptr.as_ptr(), key.as_ptr(), value.as_ptr()) })?;
        Ok(self)
    }

    /// Sets any key from its text form, parsed by the key's type.
    pub fn set_text(&mut self, key: &str, value: &str) -> Result<&mut Options> {
        let (key, value) = (to_c("option key", key)?, to_c("option value", value)?);
        check(unsafe { sys::accel_options_set(self.ptr.as_ptr(), key.as_ptr(), value.as_ptr()) })?;
        Ok(self)
    }

    /// The configuration these options resolve to now, one "key=value (source)" line per key.
    pub fn dump(&self) -> Result<String> {
        let mut text: *mut c_char = ptr::null_mut();
        check(unsafe { sys::accel_options_dump(self.ptr.as_ptr(), &mut text) })?;
        let copy = from_c_or_empty(text);
        unsafe { sys::accel_string_free(text) };
        Ok(copy)
    }

    pub(crate) fn as_ptr(&self) -> *const sys::accel_options_t {
        self.ptr.as_ptr()
    }
}

/// The pointer of optional options: NULL means defaults (and ACCEL_* variables for state keys).
pub(crate) fn options_ptr(options: Option<&Options>) -> *const sys::accel_options_t {
    options.map_or(ptr::null(), Options::as_ptr)
}

impl Drop for Options {
    fn drop(&mut self) {
        unsafe { sys::accel_options_free(self.ptr.as_ptr()) }
    }
}
