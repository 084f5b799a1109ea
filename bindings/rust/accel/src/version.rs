//! The version of the libaccel loaded at run time and what it was built with.
use accel_sys as sys;

use crate::error::Result;
use crate::strings::{from_c_or_empty, to_c};

/// (major, minor, patch) of the loaded library.
pub fn numbers() -> (i32, i32, i32) {
    // SAFETY: the version functions take nothing and never fail.
    unsafe { (sys::accel_version_major(), sys::accel_version_minor(), sys::accel_version_patch()) }
}

/// "MAJOR.MINOR.PATCH" of the loaded library.
pub fn string() -> String {
    from_c_or_empty(unsafe { sys::accel_version_string() })
}

/// The LibTorch version the library was built against, e.g. "1.13.0".
pub fn torch() -> String {
    from_c_or_empty(unsafe { sys::accel_version_torch() })
}

/// Whether a feature ("gloo", "nccl", "cuda", "mpi") was compiled in; an unknown name is false.
pub fn has_feature(name: &str) -> Result<bool> {
    let name = to_c("feature name", name)?;
    Ok(unsafe { sys::accel_version_has_feature(name.as_ptr()) } == 1)
}

/// The compiled-in features, e.g. ["gloo"].
pub fn features() -> Vec<String> {
    let list = from_c_or_empty(unsafe { sys::accel_version_features() });
    list.split(',').filter(|feature| !feature.is_empty()).map(str::to_string).collect()
}
