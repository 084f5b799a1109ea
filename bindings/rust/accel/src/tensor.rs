//! Tensor handles, and copies between them and Rust slices and Vecs (zero-copy exchange: dlpack.rs).
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

use accel_sys as sys;

use crate::error::{check, Error, Result};
use crate::handle::new_handle;
use crate::strings::from_c_or_empty;

/// A handle on a LibTorch tensor. Handles made from one another (a batch's field, a model's parameter,
/// a DLPack import) may share memory; writes through the library (`State::broadcast`) take `&mut`.
pub struct Tensor {
    ptr: NonNull<sys::accel_tensor_t>,
}

// SAFETY: tensor.h: a tensor handle may be read from several threads; writes to its data must not race
// (the crate's only writing call, broadcast, takes &mut Tensor).
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}

/// Element types (`ACCEL_DTYPE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    Float32,
    Float64,
    Float16,
    BFloat16,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    Bool,
}

impl DType {
    fn from_code(code: i32) -> Option<DType> {
        Some(match code {
            sys::ACCEL_DTYPE_FLOAT32 => DType::Float32,
            sys::ACCEL_DTYPE_FLOAT64 => DType::Float64,
            sys::ACCEL_DTYPE_FLOAT16 => DType::Float16,
            sys::ACCEL_DTYPE_BFLOAT16 => DType::BFloat16,
            sys::ACCEL_DTYPE_INT8 => DType::Int8,
            sys::ACCEL_DTYPE_INT16 => DType::Int16,
            sys::ACCEL_DTYPE_INT32 => DType::Int32,
            sys::ACCEL_DTYPE_INT64 => DType::Int64,
            sys::ACCEL_DTYPE_UINT8 => DType::UInt8,
            sys::ACCEL_DTYPE_BOOL => DType::Bool,
            _ => return None,
        })
    }

    fn code(self) -> i32 {
        match self {
            DType::Float32 => sys::ACCEL_DTYPE_FLOAT32,
            DType::Float64 => sys::ACCEL_DTYPE_FLOAT64,
            DType::Float16 => sys::ACCEL_DTYPE_FLOAT16,
            DType::BFloat16 => sys::ACCEL_DTYPE_BFLOAT16,
            DType::Int8 => sys::ACCEL_DTYPE_INT8,
            DType::Int16 => sys::ACCEL_DTYPE_INT16,
            DType::Int32 => sys::ACCEL_DTYPE_INT32,
            DType::Int64 => sys::ACCEL_DTYPE_INT64,
            DType::UInt8 => sys::ACCEL_DTYPE_UINT8,
            DType::Bool => sys::ACCEL_DTYPE_BOOL,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// The Rust types whose slices cross the ABI as tensor elements (float16 and bfloat16 have none: use
/// DLPack for them).
pub trait Element: Copy + sealed::Sealed + 'static {
    const DTYPE: DType;
}

macro_rules! element {
    ($rust:ty, $dtype:ident) => {
        impl sealed::Sealed for $rust {}
        impl Element for $rust {
            const DTYPE: DType = DType::$dtype;
        }
    };
}

element!(f32, Float32);
element!(f64, Float64);
element!(i8, Int8);
element!(i16, Int16);
element!(i32, Int32);
element!(i64, Int64);
element!(u8, UInt8);
element!(bool, Bool);

/// The number of elements `shape` holds, or the error that names it.
pub(crate) fn elements_of(shape: &[i64]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |count, &dim| usize::try_from(dim).ok().and_then(|dim| count.checked_mul(dim)))
        .ok_or_else(|| Error::new(sys::ACCEL_ERR_INVALID_ARGUMENT, format!("shape {:?} has a negative or too large dimension", shape)))
}

impl Tensor {
    pub(crate) fn from_raw(ptr: NonNull<sys::accel_tensor_t>) -> Tensor {
        Tensor { ptr }
    }

    /// Runs a call that writes a new tensor handle to its out-parameter.
    pub(crate) fn make(call: impl FnOnce(*mut *mut sys::accel_tensor_t) -> i32) -> Result<Tensor> {
        new_handle(call).map(Tensor::from_raw)
    }

    /// A CPU tensor holding a copy of `data`, C-contiguous in `shape` (`&[]` for a scalar).
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        let expected = elements_of(shape)?;
        if expected != data.len() {
            return Err(Error::new(
                sys::ACCEL_ERR_INVALID_ARGUMENT,
                format!("shape {:?} holds {} elements, the slice {}", shape, expected, data.len()),
            ));
        }
        Tensor::make(|out| unsafe {
            sys::accel_tensor_from_buffer(out, data.as_ptr() as *const c_void, T::DTYPE.code(), shape.as_ptr(), shape.len())
        })
    }

    /// A copy of the elements in C order (from any device); ACCEL_ERR_DTYPE unless `T` is the dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype() != Some(T::DTYPE) {
            return Err(Error::new(sys::ACCEL_ERR_DTYPE, format!("the tensor holds {:?}, not {:?}", self.dtype(), T::DTYPE)));
        }
        let count = usize::try_from(self.numel()).unwrap_or(0);
        let mut values: Vec<T> = Vec::with_capacity(count);
        let capacity = count * std::mem::size_of::<T>();
        let destination = if count == 0 { ptr::null_mut() } else { values.as_mut_ptr() as *mut c_void };
        check(unsafe { sys::accel_tensor_copy_to_buffer(self.as_ptr(), destination, capacity) })?;
        // SAFETY: the library wrote all `count` elements of the tensor's dtype, which is T's.
        unsafe { values.set_len(count) };
        Ok(values)
    }

    pub fn ndim(&self) -> usize {
        unsafe { sys::accel_tensor_ndim(self.as_ptr()) }
    }

    pub fn shape(&self) -> Vec<i64> {
        let ndim = self.ndim();
        let sizes = unsafe { sys::accel_tensor_shape(self.as_ptr()) };
        if ndim == 0 || sizes.is_null() {
            return Vec::new();
        }
        // SAFETY: ndim sizes, owned by the handle, valid while it lives.
        unsafe { std::slice::from_raw_parts(sizes, ndim) }.to_vec()
    }

    pub fn numel(&self) -> i64 {
        unsafe { sys::accel_tensor_numel(self.as_ptr()) }
    }

    /// None for a type without an `ACCEL_DTYPE_*` constant.
    pub fn dtype(&self) -> Option<DType> {
        DType::from_code(unsafe { sys::accel_tensor_dtype(self.as_ptr()) })
    }

    pub fn element_size(&self) -> usize {
        unsafe { sys::accel_tensor_element_size(self.as_ptr()) }
    }

    /// "cpu" or "cuda:<n>".
    pub fn device(&self) -> String {
        from_c_or_empty(unsafe { sys::accel_tensor_device(self.as_ptr()) })
    }

    /// The address of a contiguous CPU tensor's memory, valid while this handle or a DLPack export of it
    /// lives; other handles may share and write it.
    pub fn data_ptr(&self) -> Result<*mut c_void> {
        let mut data = ptr::null_mut();
        check(unsafe { sys::accel_tensor_data(self.as_ptr(), &mut data) })?;
        Ok(data)
    }

    /// The elements of a contiguous CPU tensor of `T`'s dtype, in place (no copy): a model's parameters
    /// read by a forward written in Rust.
    ///
    /// # Safety
    /// Nothing may write the memory while the slice lives. Other handles share it, and the library writes
    /// through them: a model's parameters in prepare, an optimizer step and load_state; its gradient
    /// storage in zero_grad, clipping, unscaling and a synchronising `Model::end_backward`.
    pub unsafe fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let (data, count) = self.elements::<T>()?;
        Ok(if count == 0 { &[] } else { std::slice::from_raw_parts(data as *const T, count) })
    }

    /// The same, writable: a gradient written by hand into `Model::grad_view`'s storage.
    ///
    /// # Safety
    /// Nothing else may read or write the memory while the slice lives (see `as_slice`), and no other slice
    /// of it may exist.
    #[allow(clippy::mut_from_ref)] // the memory is the library's, shared by handles: the caller vouches
    pub unsafe fn as_mut_slice<T: Element>(&self) -> Result<&mut [T]> {
        let (data, count) = self.elements::<T>()?;
        Ok(if count == 0 { &mut [] } else { std::slice::from_raw_parts_mut(data as *mut T, count) })
    }

    fn elements<T: Element>(&self) -> Result<(*mut c_void, usize)> {
        if self.dtype() != Some(T::DTYPE) {
            return Err(Error::new(sys::ACCEL_ERR_DTYPE, format!("the tensor holds {:?}, not {:?}", self.dtype(), T::DTYPE)));
        }
        let count = usize::try_from(self.numel()).unwrap_or(0);
        Ok((self.data_ptr()?, count))
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::accel_tensor_t {
        self.ptr.as_ptr()
    }
}

/// The handles of `tensors` as the C arrays of `accel_tensor_t *` the library reads.
pub(crate) fn handle_array(tensors: &[&Tensor]) -> Vec<*mut sys::accel_tensor_t> {
    tensors.iter().map(|tensor| tensor.as_ptr()).collect()
}

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe { sys::accel_tensor_free(self.ptr.as_ptr()) }
    }
}
