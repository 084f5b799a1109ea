//! Prepared data loaders (Accelerate's prepare(dataloader)): this rank's batches, as an iterator.
use std::os::raw::c_void;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use accel_sys as sys;

use crate::callbacks::{explain, KeptPayload};
use crate::dataset::Dataset;
use crate::error::{check, Result};
use crate::handle::new_handle;
use crate::options::{options_ptr, Options};
use crate::serial::one_at_a_time;
use crate::state::State;
use crate::strings::{from_c, to_c};
use crate::tensor::Tensor;

/// A loader of this rank's batches. As an iterator it yields the batches of an epoch, then None; the
/// next call starts the next epoch (`for batch in &mut loader` once per epoch).
pub struct Loader {
    ptr: NonNull<sys::accel_loader_t>,
    dataset_payload: Option<Arc<dyn KeptPayload>>,
}

// SAFETY: loader.h: a loader is used by one thread at a time (`&mut self` for what changes it; its
// dataset's callbacks are Send + Sync).
unsafe impl Send for Loader {}

impl Loader {
    /// A loader over `dataset` for this process of `state`, with the loader keys of `options`.
    pub fn new(state: &State, dataset: &Dataset, options: Option<&Options>) -> Result<Loader> {
        let ptr = new_handle(|out| unsafe { sys::accel_loader_new(out, state.as_ptr(), dataset.as_ptr(), options_ptr(options)) })?;
        Ok(Loader { ptr, dataset_payload: dataset.payload() })
    }

    /// A loader over given batches of dataset indices (a DataLoader's batch_sampler), dealt to the ranks
    /// as Accelerate deals them.
    pub fn with_batches<B: AsRef<[i64]>>(state: &State, dataset: &Dataset, batches: &[B], options: Option<&Options>) -> Result<Loader> {
        let indices: Vec<i64> = batches.iter().flat_map(|batch| batch.as_ref().iter().copied()).collect();
        let sizes: Vec<usize> = batches.iter().map(|batch| batch.as_ref().len()).collect();
        let ptr = new_handle(|out| unsafe {
            sys::accel_loader_new_with_batches(
                out,
                state.as_ptr(),
                dataset.as_ptr(),
                indices.as_ptr(),
                sizes.as_ptr(),
                sizes.len(),
                options_ptr(options),
            )
        })?;
        Ok(Loader { ptr, dataset_payload: dataset.payload() })
    }

    /// Batches this rank yields in a full epoch; None for an iterable dataset.
    pub fn length(&self) -> Result<Option<i64>> {
        let mut length = 0;
        check(unsafe { sys::accel_loader_length(self.ptr.as_ptr(), &mut length) })?;
        Ok(if length < 0 { None } else { Some(length) })
    }

    /// Whether the batch last returned is the last of the epoch.
    pub fn end_of_dataloader(&self) -> bool {
        unsafe { sys::accel_loader_end_of_dataloader(self.ptr.as_ptr()) != 0 }
    }

    /// Real samples in the last global batch; None when unknown (drop_last, given batches).
    pub fn remainder(&self) -> Option<i64> {
        match unsafe { sys::accel_loader_remainder(self.ptr.as_ptr()) } {
            -1 => None,
            remainder => Some(remainder),
        }
    }

    /// The epoch the loader is in, or starts next.
    pub fn epoch(&self) -> i64 {
        unsafe { sys::accel_loader_epoch(self.ptr.as_ptr()) }
    }

    /// Between epochs: the number of the next one.
    pub fn set_epoch(&mut self, epoch: i64) -> Result<()> {
        check(unsafe { sys::accel_loader_set_epoch(self.ptr.as_ptr(), epoch) })
    }

    /// Between epochs: the next epoch skips its first `n` batches of this rank.
    pub fn skip_first_batches(&mut self, n: i64) -> Result<()> {
        check(unsafe { sys::accel_loader_skip_first_batches(self.ptr.as_ptr(), n) })
    }

    /// The loader's position (epoch, generator, batches yielded), to resume exactly there.
    pub fn save_state(&mut self) -> Result<Vec<u8>> {
        let (mut data, mut size) = (ptr::null::<c_void>(), 0usize);
        check(unsafe { sys::accel_loader_save_state(self.ptr.as_ptr(), &mut data, &mut size) })?;
        if size == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: size bytes owned by the loader until its next call; copied now.
        Ok(unsafe { std::slice::from_raw_parts(data as *const u8, size) }.to_vec())
    }

    /// Between epochs: restores a position `save_state` gave, over the same dataset and settings.
    pub fn load_state(&mut self, saved: &[u8]) -> Result<()> {
        check(unsafe { sys::accel_loader_load_state(self.ptr.as_ptr(), saved.as_ptr() as *const c_void, saved.len()) })
    }
}

impl Iterator for Loader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        let mut batch = ptr::null_mut();
        // Starting an epoch, and every dispatched batch, is collective.
        let result = one_at_a_time(|| check(unsafe { sys::accel_loader_next(self.ptr.as_ptr(), &mut batch) }));
        match explain(&self.dataset_payload, result) {
            Err(error) => Some(Err(error)),
            Ok(()) => NonNull::new(batch).map(|ptr| Ok(Batch { ptr })),
        }
    }
}

impl Loader {
    pub(crate) fn as_ptr(&self) -> *mut sys::accel_loader_t {
        self.ptr.as_ptr()
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        unsafe { sys::accel_loader_free(self.ptr.as_ptr()) }
    }
}

/// A batch: named tensors sharing dim 0, in the dataset's order.
pub struct Batch {
    ptr: NonNull<sys::accel_batch_t>,
}

impl Batch {
    pub fn count(&self) -> usize {
        unsafe { sys::accel_batch_count(self.ptr.as_ptr()) }
    }

    /// The name of field `index`; None out of range.
    pub fn name(&self, index: usize) -> Option<String> {
        from_c(unsafe { sys::accel_batch_name(self.ptr.as_ptr(), index) })
    }

    pub fn names(&self) -> Vec<String> {
        (0..self.count()).filter_map(|index| self.name(index)).collect()
    }

    /// The field called `name` (sharing the batch's memory).
    pub fn get(&self, name: &str) -> Result<Tensor> {
        let name = to_c("field name", name)?;
        Tensor::make(|out| unsafe { sys::accel_batch_get(self.ptr.as_ptr(), name.as_ptr(), out) })
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        unsafe { sys::accel_batch_free(self.ptr.as_ptr()) }
    }
}
