//! Learning-rate schedulers (capi/accel/scheduler.h): named ones, or a Rust function of the step.
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use accel_sys as sys;

use crate::callbacks::{explain, lock, Failures, KeptPayload, Payload};
use crate::error::{check, CallbackResult, Result};
use crate::handle::new_handle;
use crate::optimizer::Optimizer;
use crate::options::{options_ptr, Options};
use crate::serial::one_at_a_time;
use crate::strings::to_c;

/// A scheduler driving an optimizer's learning rates; it steps only after a real optimizer step.
pub struct Scheduler {
    ptr: NonNull<sys::accel_scheduler_t>,
    /// The multiplier function of `from_fn`, which the library calls until the scheduler is freed.
    multiplier: Option<Arc<dyn KeptPayload>>,
}

// SAFETY: scheduler.h: one thread at a time per optimizer and its schedulers; the multiplier is Send and
// runs on the thread that steps.
unsafe impl Send for Scheduler {}

impl Scheduler {
    /// A named schedule: "constant", "linear", "cosine", "step", "exponential", "one_cycle".
    pub fn new(optimizer: &Optimizer, name: &str, options: Option<&Options>) -> Result<Scheduler> {
        let name = to_c("scheduler name", name)?;
        let ptr = new_handle(|out| unsafe { sys::accel_scheduler_new(out, optimizer.as_ptr(), name.as_ptr(), options_ptr(options)) })?;
        Ok(Scheduler { ptr, multiplier: None })
    }

    /// lr of each group = its initial lr * multiplier(step) (torch's LambdaLR). An error, a panic, or a
    /// negative or non-finite multiplier fails the step with ACCEL_ERR_CALLBACK.
    pub fn from_fn<F>(optimizer: &Optimizer, multiplier: F) -> Result<Scheduler>
    where
        F: FnMut(i64) -> CallbackResult<f64> + Send + 'static,
    {
        let payload = Arc::new(Payload { failures: Failures::default(), function: Mutex::new(multiplier) });
        let context = Arc::as_ptr(&payload) as *mut c_void;
        let kept: Option<Arc<dyn KeptPayload>> = Some(payload);
        let made = new_handle(|out| unsafe {
            sys::accel_scheduler_from_callback(out, optimizer.as_ptr(), Some(multiplier_trampoline::<F>), context)
        });
        let ptr = explain(&kept, made)?;
        Ok(Scheduler { ptr, multiplier: kept })
    }

    /// Accelerate's AcceleratedScheduler.step.
    pub fn step(&mut self) -> Result<()> {
        let result = one_at_a_time(|| check(unsafe { sys::accel_scheduler_step(self.ptr.as_ptr()) }));
        explain(&self.multiplier, result)
    }

    /// Accelerate's AcceleratedScheduler.step(metric), for reduce_on_plateau.
    pub fn step_with_metric(&mut self, metric: f64) -> Result<()> {
        let result = one_at_a_time(|| check(unsafe { sys::accel_scheduler_step_with_metric(self.ptr.as_ptr(), metric) }));
        explain(&self.multiplier, result)
    }

    /// The learning rate of group `group` after the last step.
    pub fn last_lr(&self, group: usize) -> Result<f64> {
        let mut lr = 0.0;
        check(unsafe { sys::accel_scheduler_last_lr(self.ptr.as_ptr(), group, &mut lr) })?;
        Ok(lr)
    }

    pub fn step_count(&self) -> i64 {
        unsafe { sys::accel_scheduler_step_count(self.ptr.as_ptr()) }
    }
}

impl Scheduler {
    pub(crate) fn as_ptr(&self) -> *mut sys::accel_scheduler_t {
        self.ptr.as_ptr()
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        // The multiplier payload is dropped after this, once the library can no longer call it.
        unsafe { sys::accel_scheduler_free(self.ptr.as_ptr()) }
    }
}

unsafe extern "C" fn multiplier_trampoline<F>(step: i64, multiplier: *mut f64, context: *mut c_void) -> c_int
where
    F: FnMut(i64) -> CallbackResult<f64> + Send + 'static,
{
    // SAFETY: context is the Payload the scheduler keeps until it is freed.
    let payload = &*(context as *const Payload<Mutex<F>>);
    payload.failures.run(|| {
        let mut function = lock(&payload.function);
        *multiplier = (*function)(step)?;
        Ok(())
    })
}
