//! Zero-copy exchange through DLPack (version 0.6, LibTorch 1.13's): tensors out as owned
//! `DLManagedTensor`s, DLPack tensors and Rust `Vec`s in without a copy.
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

use accel_sys as sys;

use crate::error::{Error, Result};
use crate::handle::new_handle;
use crate::tensor::{elements_of, DType, Element, Tensor};

/// An owned `DLManagedTensor`: its deleter runs on drop unless `into_raw` handed it to someone else.
pub struct DlpackTensor {
    managed: NonNull<sys::DLManagedTensor>,
}

impl DlpackTensor {
    /// Takes ownership of a DLPack tensor another framework produced.
    ///
    /// # Safety
    /// `managed` must be a valid `DLManagedTensor` that nobody else will delete.
    pub unsafe fn from_raw(managed: *mut sys::DLManagedTensor) -> Option<DlpackTensor> {
        NonNull::new(managed).map(|managed| DlpackTensor { managed })
    }

    /// Gives up ownership: the receiver must call the deleter once.
    pub fn into_raw(self) -> *mut sys::DLManagedTensor {
        let managed = self.managed.as_ptr();
        std::mem::forget(self);
        managed
    }

    /// Lends `data` to whoever takes the tensor, without copying: the Vec is dropped by the deleter.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<DlpackTensor> {
        if elements_of(shape)? != data.len() {
            return Err(Error::new(
                sys::ACCEL_ERR_INVALID_ARGUMENT,
                format!("shape {:?} does not hold the {} elements of the Vec", shape, data.len()),
            ));
        }
        let lent = Box::new(LentVec {
            managed: sys::DLManagedTensor {
                dl_tensor: sys::DLTensor {
                    data: ptr::null_mut(),
                    device: sys::DLDevice { device_type: sys::kDLCPU, device_id: 0 },
                    ndim: shape.len() as i32,
                    dtype: dl_data_type(T::DTYPE),
                    shape: ptr::null_mut(),
                    strides: ptr::null_mut(),
                    byte_offset: 0,
                },
                manager_ctx: ptr::null_mut(),
                deleter: Some(drop_lent_vec::<T>),
            },
            data,
            shape: shape.to_vec(),
        });
        let lent = Box::into_raw(lent);
        // SAFETY: just allocated; the pointers aim into the box, which lives until the deleter runs.
        unsafe {
            (*lent).managed.dl_tensor.data = (*lent).data.as_mut_ptr() as *mut c_void;
            (*lent).managed.dl_tensor.shape = (*lent).shape.as_mut_ptr();
        }
        Ok(DlpackTensor { managed: NonNull::new(lent as *mut sys::DLManagedTensor).expect("Box::into_raw is never NULL") })
    }

    pub fn as_ptr(&self) -> *const sys::DLManagedTensor {
        self.managed.as_ptr()
    }

    fn dl_tensor(&self) -> &sys::DLTensor {
        // SAFETY: owned and valid until drop.
        unsafe { &self.managed.as_ref().dl_tensor }
    }

    pub fn shape(&self) -> &[i64] {
        let tensor = self.dl_tensor();
        if tensor.ndim <= 0 || tensor.shape.is_null() {
            return &[];
        }
        unsafe { std::slice::from_raw_parts(tensor.shape, tensor.ndim as usize) }
    }

    /// Strides in elements; None means compact and row-major.
    pub fn strides(&self) -> Option<&[i64]> {
        let tensor = self.dl_tensor();
        if tensor.strides.is_null() {
            return None;
        }
        Some(unsafe { std::slice::from_raw_parts(tensor.strides, tensor.ndim.max(0) as usize) })
    }

    pub fn dtype(&self) -> sys::DLDataType {
        self.dl_tensor().dtype
    }

    pub fn device(&self) -> sys::DLDevice {
        self.dl_tensor().device
    }

    /// The address of the first element (data plus byte_offset).
    pub fn data_ptr(&self) -> *mut c_void {
        let tensor = self.dl_tensor();
        (tensor.data as *mut u8).wrapping_add(tensor.byte_offset as usize) as *mut c_void
    }

    /// The elements in place, for a compact row-major CPU tensor of T's dtype.
    ///
    /// # Safety
    /// Nothing may write the memory while the slice lives: it is shared with the tensor it came from (a
    /// model's parameter, say), which the library may change.
    pub unsafe fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let shape = self.shape();
        let compact = match self.strides() {
            None => true,
            Some(strides) => is_row_major(shape, strides),
        };
        if self.device().device_type != sys::kDLCPU || self.dtype() != dl_data_type(T::DTYPE) || !compact {
            return Err(Error::new(
                sys::ACCEL_ERR_INVALID_ARGUMENT,
                format!("not a compact CPU tensor of {:?} (device {:?}, dtype {:?})", T::DTYPE, self.device(), self.dtype()),
            ));
        }
        let count = elements_of(shape)?;
        if count == 0 {
            return Ok(&[]);
        }
        Ok(std::slice::from_raw_parts(self.data_ptr() as *const T, count))
    }
}

impl Drop for DlpackTensor {
    fn drop(&mut self) {
        // SAFETY: owned; DLPack says the owner calls the deleter exactly once.
        unsafe {
            if let Some(deleter) = self.managed.as_ref().deleter {
                deleter(self.managed.as_ptr());
            }
        }
    }
}

impl Tensor {
    /// Exports the tensor without copying; the memory stays valid while the export lives, even after
    /// this handle is dropped. Bool tensors cannot be exported (LibTorch 1.13).
    pub fn to_dlpack(&self) -> Result<DlpackTensor> {
        let managed = new_handle(|out| unsafe { sys::accel_tensor_to_dlpack(out, self.as_ptr()) })?;
        Ok(DlpackTensor { managed })
    }

    /// Wraps a DLPack tensor without copying; the tensor owns it from then on (on failure it is deleted).
    pub fn from_dlpack(managed: DlpackTensor) -> Result<Tensor> {
        let tensor = Tensor::make(|out| unsafe { sys::accel_tensor_from_dlpack(out, managed.managed.as_ptr()) })?;
        std::mem::forget(managed); // the handle calls the deleter now
        Ok(tensor)
    }

    /// A CPU tensor over `data` itself, without copying.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<Tensor> {
        Tensor::from_dlpack(DlpackTensor::from_vec(data, shape)?)
    }
}

/// A Vec lent to the library: the DLManagedTensor first, so that its address is the box's.
#[repr(C)]
struct LentVec<T> {
    managed: sys::DLManagedTensor,
    data: Vec<T>,
    shape: Vec<i64>,
}

unsafe extern "C" fn drop_lent_vec<T>(managed: *mut sys::DLManagedTensor) {
    drop(Box::from_raw(managed as *mut LentVec<T>));
}

fn dl_data_type(dtype: DType) -> sys::DLDataType {
    let (code, bits) = match dtype {
        DType::Float32 => (sys::kDLFloat, 32),
        DType::Float64 => (sys::kDLFloat, 64),
        DType::Float16 => (sys::kDLFloat, 16),
        DType::BFloat16 => (sys::kDLBfloat, 16),
        DType::Int8 => (sys::kDLInt, 8),
        DType::Int16 => (sys::kDLInt, 16),
        DType::Int32 => (sys::kDLInt, 32),
        DType::Int64 => (sys::kDLInt, 64),
        DType::UInt8 => (sys::kDLUInt, 8),
        DType::Bool => (sys::kDLBool, 8),
    };
    sys::DLDataType { code, bits, lanes: 1 }
}

/// Whether strides walk the shape in C order without gaps (the stride of a dimension of size 1 does
/// not matter: LibTorch leaves any value there).
fn is_row_major(shape: &[i64], strides: &[i64]) -> bool {
    let mut expected = 1;
    for (&size, &stride) in shape.iter().zip(strides).rev() {
        if size > 1 && stride != expected {
            return false;
        }
        expected *= size;
    }
    true
}
