//! Datasets (capi/accel/loader.h): over tensors, over a Rust function of the index, over a stream, or
//! over memory-mapped .safetensors and .npy files.
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use accel_sys as sys;

use crate::callbacks::{lock, Failures, KeptPayload, Payload};
use crate::error::{check, CallbackResult, Result};
use crate::handle::new_handle;
use crate::strings::{path_to_c, to_c};
use crate::tensor::{handle_array, Tensor};

/// A dataset; loaders made from it keep what they need of it alive.
pub struct Dataset {
    ptr: NonNull<sys::accel_dataset_t>,
    payload: Option<Arc<dyn KeptPayload>>,
}

/// The item a dataset callback is building: named tensors, stacked into batches by the loader.
pub struct Sample<'a> {
    ptr: NonNull<sys::accel_sample_t>,
    _during_the_callback: PhantomData<&'a mut sys::accel_sample_t>,
}

impl Sample<'_> {
    /// Adds a named tensor to the item (shared, not copied).
    pub fn add(&mut self, name: &str, tensor: &Tensor) -> Result<()> {
        let name = to_c("field name", name)?;
        check(unsafe { sys::accel_sample_add(self.ptr.as_ptr(), name.as_ptr(), tensor.as_ptr()) })
    }
}

/// An iterable dataset's source (Accelerate's IterableDataset). Its loaders dispatch by default: rank 0
/// reads the stream and sends each rank its rows.
pub trait ItemStream: Send + 'static {
    /// Restarts the stream for `epoch` (Accelerate's set_epoch, then a new iterator).
    fn start_epoch(&mut self, epoch: i64) -> CallbackResult<()>;
    /// Adds the next item's tensors to `sample` and returns true, or returns false at the end.
    fn next_item(&mut self, sample: &mut Sample<'_>) -> CallbackResult<bool>;
}

impl Dataset {
    /// A dataset over named tensors sharing dim 0 (one sample per row); the tensors are shared.
    pub fn from_tensors(fields: &[(&str, &Tensor)]) -> Result<Dataset> {
        let names = fields.iter().map(|(name, _)| to_c("field name", name)).collect::<Result<Vec<_>>>()?;
        let name_pointers: Vec<_> = names.iter().map(|name| name.as_ptr()).collect();
        let tensors: Vec<&Tensor> = fields.iter().map(|(_, tensor)| *tensor).collect();
        let tensor_pointers = handle_array(&tensors);
        let ptr = new_handle(|out| unsafe {
            sys::accel_dataset_from_tensors(out, name_pointers.as_ptr(), tensor_pointers.as_ptr(), fields.len())
        })?;
        Ok(Dataset { ptr, payload: None })
    }

    /// A map-style dataset of `length` items that `get_item` builds. With prefetch_threads it runs on
    /// several threads at once, hence `Sync`. An error or panic in it fails the loader's call with
    /// ACCEL_ERR_CALLBACK and its message.
    pub fn from_fn<F>(length: i64, get_item: F) -> Result<Dataset>
    where
        F: Fn(i64, &mut Sample<'_>) -> CallbackResult<()> + Send + Sync + 'static,
    {
        let payload = Arc::new(Payload { failures: Failures::default(), function: get_item });
        let context = Arc::as_ptr(&payload) as *mut c_void;
        let ptr = new_handle(|out| unsafe { sys::accel_dataset_from_callback(out, length, Some(get_item_trampoline::<F>), context) })?;
        Ok(Dataset { ptr, payload: Some(payload) })
    }

    /// An iterable dataset over a stream of items.
    pub fn from_stream<S: ItemStream>(stream: S) -> Result<Dataset> {
        let payload = Arc::new(Payload { failures: Failures::default(), function: Mutex::new(stream) });
        let context = Arc::as_ptr(&payload) as *mut c_void;
        let ptr = new_handle(|out| unsafe {
            sys::accel_dataset_from_iterable(out, Some(start_epoch_trampoline::<S>), Some(next_item_trampoline::<S>), context)
        })?;
        Ok(Dataset { ptr, payload: Some(payload) })
    }

    /// A dataset over a memory-mapped .safetensors file, a field per tensor in it.
    pub fn from_safetensors(path: impl AsRef<Path>) -> Result<Dataset> {
        let path = path_to_c(path.as_ref())?;
        let ptr = new_handle(|out| unsafe { sys::accel_dataset_from_safetensors(out, path.as_ptr()) })?;
        Ok(Dataset { ptr, payload: None })
    }

    /// A dataset over memory-mapped .npy files, one field each.
    pub fn from_npy<P: AsRef<Path>>(fields: &[(&str, P)]) -> Result<Dataset> {
        let names = fields.iter().map(|(name, _)| to_c("field name", name)).collect::<Result<Vec<_>>>()?;
        let paths = fields.iter().map(|(_, path)| path_to_c(path.as_ref())).collect::<Result<Vec<_>>>()?;
        let name_pointers: Vec<_> = names.iter().map(|name| name.as_ptr()).collect();
        let path_pointers: Vec<_> = paths.iter().map(|path| path.as_ptr()).collect();
        let ptr =
            new_handle(|out| unsafe { sys::accel_dataset_from_npy(out, name_pointers.as_ptr(), path_pointers.as_ptr(), fields.len()) })?;
        Ok(Dataset { ptr, payload: None })
    }

    /// The number of samples; None for an iterable dataset.
    pub fn length(&self) -> Option<i64> {
        match unsafe { sys::accel_dataset_length(self.ptr.as_ptr()) } {
            -1 => None,
            length => Some(length),
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::accel_dataset_t {
        self.ptr.as_ptr()
    }

    pub(crate) fn payload(&self) -> Option<Arc<dyn KeptPayload>> {
        self.payload.clone()
    }
}

impl Drop for Dataset {
    fn drop(&mut self) {
        unsafe { sys::accel_dataset_free(self.ptr.as_ptr()) }
    }
}

fn sample<'a>(ptr: *mut sys::accel_sample_t) -> CallbackResult<Sample<'a>> {
    let ptr = NonNull::new(ptr).ok_or("the library passed no sample")?;
    Ok(Sample { ptr, _during_the_callback: PhantomData })
}

unsafe extern "C" fn get_item_trampoline<F>(index: i64, item: *mut sys::accel_sample_t, context: *mut c_void) -> c_int
where
    F: Fn(i64, &mut Sample<'_>) -> CallbackResult<()> + Send + Sync + 'static,
{
    // SAFETY: context is the Arc'd Payload<F> that the dataset and its loaders keep alive.
    let payload = &*(context as *const Payload<F>);
    payload.failures.run(|| (payload.function)(index, &mut sample(item)?))
}

unsafe extern "C" fn start_epoch_trampoline<S: ItemStream>(epoch: i64, context: *mut c_void) -> c_int {
    let payload = &*(context as *const Payload<Mutex<S>>);
    payload.failures.run(|| lock(&payload.function).start_epoch(epoch))
}

unsafe extern "C" fn next_item_trampoline<S: ItemStream>(item: *mut sys::accel_sample_t, end: *mut c_int, context: *mut c_void) -> c_int {
    let payload = &*(context as *const Payload<Mutex<S>>);
    payload.failures.run(|| {
        if !lock(&payload.function).next_item(&mut sample(item)?)? {
            *end = 1;
        }
        Ok(())
    })
}
