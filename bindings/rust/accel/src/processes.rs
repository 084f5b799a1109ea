//! Working with the processes of a state (capi/accel/processes.h): split_between_processes,
//! main_process_first, send_to_device.
use std::os::raw::c_int;

use accel_sys as sys;

use crate::error::{check, Result};
use crate::serial::one_at_a_time;
use crate::state::State;
use crate::tensor::Tensor;

/// This process's share of a range of items: `first..first + count`; with padding every rank has
/// `padded_count` items, the missing ones repeating the last item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeShare {
    pub first: i64,
    pub count: i64,
    pub padded_count: i64,
}

pub(crate) type SectionCall = unsafe extern "C" fn(*mut sys::accel_state_t) -> c_int;

/// Ends a section (main process first, autocast) even when the work in it panicked: the other ranks wait for
/// the main process's end, and autocast must not stay on.
struct SectionEnd<'a> {
    state: &'a State,
    end: SectionCall,
    ended: bool,
}

impl SectionEnd<'_> {
    fn end(mut self) -> Result<()> {
        self.ended = true;
        one_at_a_time(|| check(unsafe { (self.end)(self.state.as_ptr()) }))
    }
}

impl Drop for SectionEnd<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // Unwinding already: the panic is what the program reports, not this call's result.
            let _ = one_at_a_time(|| check(unsafe { (self.end)(self.state.as_ptr()) }));
        }
    }
}

impl State {
    /// How `length` items are dealt to the processes (Accelerate's split_between_processes).
    pub fn split_range(&self, length: i64) -> Result<RangeShare> {
        let mut share = RangeShare { first: 0, count: 0, padded_count: 0 };
        check(unsafe { sys::accel_state_split_range(self.as_ptr(), length, &mut share.first, &mut share.count, &mut share.padded_count) })?;
        Ok(share)
    }

    /// This process's rows (dim 0) of `input`, sharing its memory unless padding adds rows.
    pub fn split_tensor(&self, input: &Tensor, apply_padding: bool) -> Result<Tensor> {
        Tensor::make(|out| unsafe { sys::accel_state_split_tensor(self.as_ptr(), input.as_ptr(), apply_padding as i32, out) })
    }

    /// Runs `work` on the main process first, then on the others (collective): "download on rank 0 first".
    pub fn main_process_first<T>(&self, work: impl FnOnce() -> T) -> Result<T> {
        self.section(sys::accel_state_main_process_first_begin, sys::accel_state_main_process_first_end, work)
    }

    /// `main_process_first`, with the main process of each machine going first.
    pub fn local_main_process_first<T>(&self, work: impl FnOnce() -> T) -> Result<T> {
        self.section(sys::accel_state_local_main_process_first_begin, sys::accel_state_local_main_process_first_end, work)
    }

    /// `work` between a begin and an end call of the library, the end called even when `work` panics.
    pub(crate) fn section<T>(&self, begin: SectionCall, end: SectionCall, work: impl FnOnce() -> T) -> Result<T> {
        one_at_a_time(|| check(unsafe { begin(self.as_ptr()) }))?;
        let section = SectionEnd { state: self, end, ended: false };
        let result = work();
        section.end()?;
        Ok(result)
    }

    /// `input` on the state's device: the same tensor when it is already there, else a copy.
    pub fn send_to_device(&self, input: &Tensor, non_blocking: bool) -> Result<Tensor> {
        Tensor::make(|out| unsafe { sys::accel_state_send_to_device(self.as_ptr(), input.as_ptr(), non_blocking as i32, out) })
    }
}
