//! Accelerate's data rules for a loader the library does not drive (capi/accel/dealing.h):
//! BatchSamplerShard, IterableDatasetShard and DataLoaderDispatcher's slicing. A dealer is fed one epoch's
//! base batches, or a stream's item positions, and gives back this process's batches of those values.
use std::os::raw::c_int;
use std::ptr::{self, NonNull};

use accel_sys as sys;

use crate::error::{check, Result};
use crate::handle::new_handle;

/// One epoch's dealing, made by [`Dealer::shard`], [`Dealer::iterable`] or [`Dealer::dispatch`]; the
/// batches it gives back are copies of the values pushed.
pub struct Dealer {
    ptr: NonNull<sys::accel_dealer_t>,
}

// SAFETY: dealing.h: a dealer is used by one thread at a time (`&mut self` for what changes it).
unsafe impl Send for Dealer {}

impl Dealer {
    /// BatchSamplerShard's batches of base batches of `batch_size` indices (None: dynamic batch sizes,
    /// whose whole early batches pad the last round).
    pub fn shard(
        batch_size: Option<i64>,
        drop_last: bool,
        num_processes: i64,
        process_index: i64,
        split_batches: bool,
        even_batches: bool,
    ) -> Result<Dealer> {
        let ptr = new_handle(|out| unsafe {
            sys::accel_dealer_new_shard(
                out,
                batch_size.unwrap_or(0),
                c_int::from(drop_last),
                num_processes,
                process_index,
                c_int::from(split_batches),
                c_int::from(even_batches),
            )
        })?;
        Ok(Dealer { ptr })
    }

    /// IterableDatasetShard's: this process's contiguous slice of each global batch of the stream's item
    /// positions (push every item's position, whichever process reads it).
    pub fn iterable(batch_size: i64, drop_last: bool, num_processes: i64, process_index: i64, split_batches: bool) -> Result<Dealer> {
        let ptr = new_handle(|out| unsafe {
            sys::accel_dealer_new_iterable(
                out,
                batch_size,
                c_int::from(drop_last),
                num_processes,
                process_index,
                c_int::from(split_batches),
            )
        })?;
        Ok(Dealer { ptr })
    }

    /// DataLoaderDispatcher's: this process's rows of each step made of the base batches rank 0 reads.
    pub fn dispatch(num_processes: i64, process_index: i64, split_batches: bool, drop_last: bool) -> Result<Dealer> {
        let ptr = new_handle(|out| unsafe {
            sys::accel_dealer_new_dispatch(out, num_processes, process_index, c_int::from(split_batches), c_int::from(drop_last))
        })?;
        Ok(Dealer { ptr })
    }

    /// Feeds the next base batch (or item positions); returns the batches this process yields now.
    /// Errors: a shard's batch longer than its batch size; a push after `finish`.
    pub fn push(&mut self, indices: &[i64]) -> Result<Vec<Vec<i64>>> {
        check(unsafe { sys::accel_dealer_push(self.ptr.as_ptr(), indices.as_ptr(), indices.len()) })?;
        self.ready()
    }

    /// Ends the epoch; returns the batches this process yields after the last base batch (leftovers,
    /// padding, the last step). Errors: a second call.
    pub fn finish(&mut self) -> Result<Vec<Vec<i64>>> {
        check(unsafe { sys::accel_dealer_finish(self.ptr.as_ptr()) })?;
        self.ready()
    }

    /// The batches queued, copied out of the dealer.
    fn ready(&mut self) -> Result<Vec<Vec<i64>>> {
        let mut batches = Vec::new();
        loop {
            let (mut indices, mut count, mut has_batch) = (ptr::null(), 0usize, 0);
            check(unsafe { sys::accel_dealer_next(self.ptr.as_ptr(), &mut indices, &mut count, &mut has_batch) })?;
            if has_batch == 0 {
                return Ok(batches);
            }
            // SAFETY: count indices owned by the dealer until its next call; copied now.
            let batch: &[i64] = if count == 0 { &[] } else { unsafe { std::slice::from_raw_parts(indices, count) } };
            batches.push(batch.to_vec());
        }
    }

    /// Batches this process yields for `base_len` base batches (stream items, for an iterable dealer), the
    /// last of `last_batch_size` indices (read only by a shard of a fixed batch size).
    pub fn length(&self, base_len: i64, last_batch_size: i64) -> Result<i64> {
        let mut length = 0;
        check(unsafe { sys::accel_dealer_length(self.ptr.as_ptr(), base_len, last_batch_size, &mut length) })?;
        Ok(length)
    }

    /// After `finish`: the real rows of a dispatch dealer's last step (before completion); None when there
    /// was no step, and for the other kinds.
    pub fn remainder(&self) -> Result<Option<i64>> {
        let mut remainder = 0;
        check(unsafe { sys::accel_dealer_remainder(self.ptr.as_ptr(), &mut remainder) })?;
        Ok(if remainder < 0 { None } else { Some(remainder) })
    }
}

impl Drop for Dealer {
    fn drop(&mut self) {
        unsafe { sys::accel_dealer_free(self.ptr.as_ptr()) }
    }
}
