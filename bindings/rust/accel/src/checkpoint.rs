//! Checkpoints (capi/accel/checkpoint.h): save_state and load_state.
use std::path::Path;

use accel_sys as sys;

use crate::error::{check, Result};
use crate::loader::Loader;
use crate::model::Model;
use crate::optimizer::Optimizer;
use crate::scheduler::Scheduler;
use crate::serial::one_at_a_time;
use crate::state::State;
use crate::strings::path_to_c;

/// The objects a checkpoint covers. Their order is part of the checkpoint: load with the same lists, in
/// the same order, as at save.
#[derive(Default)]
pub struct Checkpointed<'a> {
    pub models: &'a [&'a Model],
    pub optimizers: &'a [&'a Optimizer],
    pub schedulers: &'a [&'a Scheduler],
    pub loaders: &'a [&'a Loader],
}

type CheckpointCall = unsafe extern "C" fn(
    *mut sys::accel_state_t,
    *const std::os::raw::c_char,
    *const *mut sys::accel_model_t,
    usize,
    *const *mut sys::accel_optimizer_t,
    usize,
    *const *mut sys::accel_scheduler_t,
    usize,
    *const *mut sys::accel_loader_t,
    usize,
) -> std::os::raw::c_int;

impl State {
    /// Accelerate's save_state: the objects, the grad scaler, each rank's random generators and the
    /// accumulation step into `directory` (collective; written aside, then moved into place atomically).
    pub fn save_state(&self, directory: impl AsRef<Path>, objects: &Checkpointed) -> Result<()> {
        self.checkpoint(sys::accel_state_save_state, directory.as_ref(), objects)
    }

    /// Restores what save_state wrote into the same objects; everything is checked first, so on an
    /// error nothing has changed.
    pub fn load_state(&self, directory: impl AsRef<Path>, objects: &Checkpointed) -> Result<()> {
        self.checkpoint(sys::accel_state_load_state, directory.as_ref(), objects)
    }

    fn checkpoint(&self, call: CheckpointCall, directory: &Path, objects: &Checkpointed) -> Result<()> {
        let directory = path_to_c(directory)?;
        let models: Vec<_> = objects.models.iter().map(|model| model.as_ptr()).collect();
        let optimizers: Vec<_> = objects.optimizers.iter().map(|optimizer| optimizer.as_ptr()).collect();
        let schedulers: Vec<_> = objects.schedulers.iter().map(|scheduler| scheduler.as_ptr()).collect();
        let loaders: Vec<_> = objects.loaders.iter().map(|loader| loader.as_ptr()).collect();
        one_at_a_time(|| {
            check(unsafe {
                call(
                    self.as_ptr(),
                    directory.as_ptr(),
                    models.as_ptr(),
                    models.len(),
                    optimizers.as_ptr(),
                    optimizers.len(),
                    schedulers.as_ptr(),
                    schedulers.len(),
                    loaders.as_ptr(),
                    loaders.len(),
                )
            })
        })
    }
}
