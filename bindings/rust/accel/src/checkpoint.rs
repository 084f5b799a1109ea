//! Checkpoints (capi/accel/checkpoint.h): register_for_checkpointing (and its variant for objects any
//! number of processes can load), save_state (blocking or in the background) and load_state.
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use accel_sys as sys;

use crate::callbacks::{lock, Failures, KeptPayload, Payload};
use crate::error::{check, CallbackResult, Result};
use crate::loader::Loader;
use crate::model::Model;
use crate::optimizer::Optimizer;
use crate::scheduler::Scheduler;
use crate::serial::one_at_a_time;
use crate::state::State;
use crate::strings::{path_to_c, to_c};

/// The objects a checkpoint covers. Their order is part of the checkpoint: load with the same lists, in
/// the same order, as at save.
#[derive(Default)]
pub struct Checkpointed<'a> {
    pub models: &'a [&'a Model],
    pub optimizers: &'a [&'a Optimizer],
    pub schedulers: &'a [&'a Scheduler],
    pub loaders: &'a [&'a Loader],
}

/// The bytes every process that saved an object of [`State::register_parts_for_checkpointing`] wrote,
/// one part per saving process (by its rank), lent to the object's `load` for the length of the call.
pub struct SavedParts<'a> {
    ptr: NonNull<sys::accel_parts_t>,
    _during_the_callback: PhantomData<&'a mut sys::accel_parts_t>,
}

impl SavedParts<'_> {
    /// How many processes saved the object: its parts are 0 .. count() - 1.
    pub fn count(&self) -> i64 {
        unsafe { sys::accel_parts_count(self.ptr.as_ptr()) }
    }

    /// The bytes process `part` saved, borrowed until the next read: the library holds one part at a
    /// time, so a process loading its share of a large state never holds every process's bytes at once.
    /// ACCEL_ERR_OUT_OF_RANGE for a part outside 0 .. count(); ACCEL_ERR_IO naming an unreadable file.
    pub fn read(&mut self, part: i64) -> Result<&[u8]> {
        let (mut data, mut size) = (std::ptr::null(), 0);
        check(unsafe { sys::accel_parts_read(self.ptr.as_ptr(), part, &mut data, &mut size) })?;
        // SAFETY: data holds size bytes until the next read or the callback's return; the borrow of
        // `self` this slice keeps ends before either.
        Ok(if size == 0 { &[] } else { unsafe { std::slice::from_raw_parts(data as *const u8, size) } })
    }

    /// Drops the part last read, once it is parsed or copied, so that it is not held twice while the
    /// object loads (the borrow `read` gave has ended by then).
    pub fn release(&mut self) -> Result<()> {
        check(unsafe { sys::accel_parts_release(self.ptr.as_ptr()) })
    }
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
    /// Accelerate's register_for_checkpointing: an object of the caller's that every later save_state
    /// saves (`save` returns its bytes, written into this rank's folder of the checkpoint as
    /// rank<r>/custom_checkpoint_<name>.bin) and every load_state restores (`load` gets the bytes back),
    /// in registration order, before the models and the rest. name: letters, digits, '_', '-', '.', not
    /// starting with '.'; every rank registers the same names. A checkpoint must hold exactly the
    /// registered names (ACCEL_ERR_INVALID_ARGUMENT naming the missing or extra one, before any `load`
    /// runs). An error or a panic in `save` or `load` fails the call with ACCEL_ERR_CALLBACK naming the
    /// object. The functions live as long as the state; a name already registered is refused.
    pub fn register_for_checkpointing<S, L>(&self, name: &str, save: S, load: L) -> Result<()>
    where
        S: FnMut() -> CallbackResult<Vec<u8>> + Send + 'static,
        L: FnMut(&[u8]) -> CallbackResult<()> + Send + 'static,
    {
        self.register(name, (save, load), |name, context| unsafe {
            sys::accel_state_register_for_checkpointing(
                self.as_ptr(),
                name,
                Some(save_trampoline::<S, L>),
                Some(load_trampoline::<S, L>),
                context,
            )
        })
    }

    /// register_for_checkpointing for an object any number of processes can load: a state every process
    /// holds alike (a scheduler's), or one each process holds a share of (a ZeRO optimizer's). Saved the
    /// same way, one file per rank; at load_state every saving process's file must exist (ACCEL_ERR_IO
    /// naming a missing one, before any `load` runs), and `load` reads whichever saving process's bytes it
    /// needs through [`SavedParts`], one part held at a time. So a checkpoint whose registered objects are
    /// all of this kind resumes on another number of processes. Otherwise as register_for_checkpointing.
    pub fn register_parts_for_checkpointing<S, L>(&self, name: &str, save: S, load: L) -> Result<()>
    where
        S: FnMut() -> CallbackResult<Vec<u8>> + Send + 'static,
        L: FnMut(&mut SavedParts<'_>) -> CallbackResult<()> + Send + 'static,
    {
        self.register(name, (save, load), |name, context| unsafe {
            sys::accel_state_register_parts_for_checkpointing(
                self.as_ptr(),
                name,
                Some(save_trampoline::<S, L>),
                Some(load_parts_trampoline::<S, L>),
                context,
            )
        })
    }

    /// Registers `functions` through `call` (given the C name and the payload), then keeps them as long
    /// as the state. `registered` is locked across the call so that its order is the library's.
    fn register<F: Send + 'static>(&self, name: &str, functions: F, call: impl FnOnce(*const c_char, *mut c_void) -> c_int) -> Result<()> {
        let name = to_c("object name", name)?;
        let payload = Arc::new(Payload { failures: Failures::default(), function: Mutex::new(functions) });
        let context = Arc::as_ptr(&payload) as *mut c_void;
        let mut registered = lock(&self.registered);
        one_at_a_time(|| check(call(name.as_ptr(), context)))?;
        registered.push(payload);
        Ok(())
    }

    /// Accelerate's save_state: the objects, the grad scaler, each rank's random generators and the
    /// accumulation step into `directory` (collective; written aside, then moved into place atomically).
    pub fn save_state(&self, directory: impl AsRef<Path>, objects: &Checkpointed) -> Result<()> {
        self.checkpoint(sys::accel_state_save_state, directory.as_ref(), objects)
    }

    /// save_state in the background: the objects are captured before it returns (the models' tensors
    /// copied to host memory, about one checkpoint's size), then a thread writes them and moves the
    /// checkpoint into place once every rank's part is written, while training goes on. A save already in
    /// flight is waited for first. A failure in the background is returned once, by the next save_state,
    /// save_state_async, load_state, wait_for_save or shutdown (which wait for it), or by backward or an
    /// optimizer step, which then do nothing else; the previous checkpoint stays. Dropping the last
    /// handle of the state waits for the save.
    pub fn save_state_async(&self, directory: impl AsRef<Path>, objects: &Checkpointed) -> Result<()> {
        self.checkpoint(sys::accel_state_save_state_async, directory.as_ref(), objects)
    }

    /// Waits for the background save in flight, if any, and returns its failure if nothing reported it.
    pub fn wait_for_save(&self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_wait_for_save(self.as_ptr()) }))
    }

    /// The number of the next numbered checkpoint (Accelerate's ProjectConfiguration.iteration): one more
    /// after each numbered save, the loaded checkpoint's number + 1 after a load from a numbered folder.
    pub fn checkpoint_iteration(&self) -> i64 {
        unsafe { sys::accel_state_checkpoint_iteration(self.as_ptr()) }
    }

    /// Sets the number of the next numbered checkpoint (to resume the numbering in a fresh process).
    pub fn set_checkpoint_iteration(&self, iteration: i64) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_set_checkpoint_iteration(self.as_ptr(), iteration) }))
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
        let registered: Vec<Arc<dyn KeptPayload>> = lock(&self.registered).clone();
        let result = one_at_a_time(|| {
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
        });
        registered.iter().fold(result, |result, payload| payload.failures().explain(result))
    }
}

// Both kinds of object save alike: `L` is either kind's load function.
unsafe extern "C" fn save_trampoline<S, L>(sink: *mut sys::accel_sink_t, context: *mut c_void) -> c_int
where
    S: FnMut() -> CallbackResult<Vec<u8>> + Send + 'static,
{
    // SAFETY: context is the Payload the state keeps until it is freed.
    let payload = &*(context as *const Payload<Mutex<(S, L)>>);
    payload.failures.run(|| {
        let bytes = (lock(&payload.function).0)()?;
        check(sys::accel_sink_write(sink, bytes.as_ptr() as *const c_void, bytes.len()))?;
        Ok(())
    })
}

unsafe extern "C" fn load_trampoline<S, L>(data: *const c_void, size: usize, context: *mut c_void) -> c_int
where
    S: FnMut() -> CallbackResult<Vec<u8>> + Send + 'static,
    L: FnMut(&[u8]) -> CallbackResult<()> + Send + 'static,
{
    // SAFETY: context is the Payload the state keeps until it is freed; data holds size bytes during the call.
    let payload = &*(context as *const Payload<Mutex<(S, L)>>);
    let bytes: &[u8] = if size == 0 { &[] } else { std::slice::from_raw_parts(data as *const u8, size) };
    payload.failures.run(|| (lock(&payload.function).1)(bytes))
}

unsafe extern "C" fn load_parts_trampoline<S, L>(parts: *mut sys::accel_parts_t, context: *mut c_void) -> c_int
where
    L: FnMut(&mut SavedParts<'_>) -> CallbackResult<()> + Send + 'static,
{
    // SAFETY: context is the Payload the state keeps until it is freed; parts is live during the call.
    let payload = &*(context as *const Payload<Mutex<(S, L)>>);
    payload.failures.run(|| {
        let ptr = NonNull::new(parts).ok_or("the library passed no parts")?;
        (lock(&payload.function).1)(&mut SavedParts { ptr, _during_the_callback: PhantomData })
    })
}
