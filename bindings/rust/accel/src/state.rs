//! The process state (Accelerate's Accelerator): how the process was launched, its device, the process
//! group. Collectives, the training step and tracking are methods of it too (collectives.rs, train.rs,
//! tracking.rs, processes.rs), as the C ABI names them accel_state_*.
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use accel_sys as sys;

use crate::callbacks::KeptPayload;
use crate::error::{check, Result};
use crate::handle::new_handle;
use crate::options::{options_ptr, Options};
use crate::serial::one_at_a_time;
use crate::strings::from_c_or_empty;

/// A handle on the process state. Every state of a process shares one process group; the last handle
/// to go releases it without communicating. `shutdown` is the collective teardown.
pub struct State {
    ptr: NonNull<sys::accel_state_t>,
    /// register_for_checkpointing's functions, which the library calls until the state is freed.
    pub(crate) registered: Mutex<Vec<Arc<dyn KeptPayload>>>,
}

// SAFETY: state.h: the accessors are thread-safe; everything else goes through serial::one_at_a_time.
unsafe impl Send for State {}
unsafe impl Sync for State {}

/// How the processes are spread (`accel_state_distributed_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistributedType {
    No,
    MultiCpu,
    MultiGpu,
    /// A value this crate does not know, from a newer library.
    Other(i32),
}

impl State {
    /// Creates or joins the process state (with several processes: waits until every rank has joined).
    /// `None`: defaults and the ACCEL_* environment.
    pub fn new(options: Option<&Options>) -> Result<State> {
        let ptr = one_at_a_time(|| new_handle(|out| unsafe { sys::accel_state_new(out, options_ptr(options)) }))?;
        Ok(State { ptr, registered: Mutex::new(Vec::new()) })
    }

    /// Collective teardown of the process group of every state of this process; a second call does nothing.
    pub fn shutdown(&self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_shutdown(self.as_ptr()) }))
    }

    /// Retires the process state behind this handle (Accelerate's `_reset_state`): the next `State::new`
    /// may choose any settings; objects made before can only be dropped.
    pub fn reset(&self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_reset(self.as_ptr()) }))
    }

    /// A barrier across every process.
    pub fn wait_for_everyone(&self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_wait_for_everyone(self.as_ptr()) }))
    }

    /// Accelerate's set_seed: LibTorch's default CPU (and CUDA) generators of this process, seeded with
    /// `seed`, plus the process index when `device_specific`.
    pub fn set_seed(&self, seed: u64, device_specific: bool) -> Result<()> {
        check(unsafe { sys::accel_state_set_seed(self.as_ptr(), seed, std::os::raw::c_int::from(device_specific)) })
    }

    pub fn num_processes(&self) -> i32 {
        unsafe { sys::accel_state_num_processes(self.as_ptr()) }
    }

    pub fn process_index(&self) -> i32 {
        unsafe { sys::accel_state_process_index(self.as_ptr()) }
    }

    pub fn local_process_index(&self) -> i32 {
        unsafe { sys::accel_state_local_process_index(self.as_ptr()) }
    }

    pub fn num_local_processes(&self) -> i32 {
        unsafe { sys::accel_state_num_local_processes(self.as_ptr()) }
    }

    pub fn is_main_process(&self) -> bool {
        unsafe { sys::accel_state_is_main_process(self.as_ptr()) != 0 }
    }

    pub fn is_local_main_process(&self) -> bool {
        unsafe { sys::accel_state_is_local_main_process(self.as_ptr()) != 0 }
    }

    pub fn is_last_process(&self) -> bool {
        unsafe { sys::accel_state_is_last_process(self.as_ptr()) != 0 }
    }

    pub fn distributed_type(&self) -> DistributedType {
        match unsafe { sys::accel_state_distributed_type(self.as_ptr()) } {
            sys::ACCEL_DISTRIBUTED_NO => DistributedType::No,
            sys::ACCEL_DISTRIBUTED_MULTI_CPU => DistributedType::MultiCpu,
            sys::ACCEL_DISTRIBUTED_MULTI_GPU => DistributedType::MultiGpu,
            other => DistributedType::Other(other),
        }
    }

    /// "NO", "MULTI_CPU" or "MULTI_GPU".
    pub fn distributed_type_name(&self) -> String {
        from_c_or_empty(unsafe { sys::accel_state_distributed_type_name(self.as_ptr()) })
    }

    /// "cpu" or "cuda:<n>".
    pub fn device(&self) -> String {
        from_c_or_empty(unsafe { sys::accel_state_device(self.as_ptr()) })
    }

    /// "no", "fp16" or "bf16".
    pub fn mixed_precision(&self) -> String {
        from_c_or_empty(unsafe { sys::accel_state_mixed_precision(self.as_ptr()) })
    }

    /// "gloo", "nccl", or "" with one process; "gloo+shm" when all-reduces go through shared memory,
    /// "gloo+hier-shm" when through each node's and then between the nodes' leaders.
    pub fn backend(&self) -> String {
        from_c_or_empty(unsafe { sys::accel_state_backend(self.as_ptr()) })
    }

    /// Whether a failed collective or a shutdown has left the process group unusable.
    pub fn is_broken(&self) -> bool {
        unsafe { sys::accel_state_is_broken(self.as_ptr()) != 0 }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::accel_state_t {
        self.ptr.as_ptr()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // The registered payloads are dropped after this, once the library can no longer call them.
        unsafe { sys::accel_state_free(self.ptr.as_ptr()) }
    }
}
