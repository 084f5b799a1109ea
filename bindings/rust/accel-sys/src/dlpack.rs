//! The DLPack structs (version 0.6, the one LibTorch 1.13 speaks) that capi/accel/tensor.h only
//! forward-declares: accel_tensor_to_dlpack hands out a DLManagedTensor, accel_tensor_from_dlpack takes one.
use std::os::raw::{c_int, c_void};

/// DLDeviceType values (a C enum, int-sized).
pub const kDLCPU: c_int = 1;
pub const kDLCUDA: c_int = 2;

/// DLDataTypeCode values.
pub const kDLInt: u8 = 0;
pub const kDLUInt: u8 = 1;
pub const kDLFloat: u8 = 2;
pub const kDLBfloat: u8 = 4;
/// Bool, numbered as DLPack 0.8 does; accel reads it as bool.
pub const kDLBool: u8 = 6;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: c_int,
    pub device_id: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: c_int,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    /// In elements; NULL means compact and row-major.
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(managed: *mut DLManagedTensor)>,
}
