//! Optimizers (capi/accel/optimizer.h) with Accelerate's semantics: nothing happens on a step that
//! accumulates; under fp16 an overflowing step is skipped.
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

use accel_sys as sys;

use crate::callbacks::{explain, lock, Failures, KeptPayload, Payload};
use crate::error::{check, CallbackResult, Result};
use crate::handle::new_handle;
use crate::model::Model;
use crate::options::{options_ptr, Options};
use crate::serial::one_at_a_time;
use crate::strings::{from_c_or_empty, to_c};
use crate::tensor::Tensor;

pub struct Optimizer {
    ptr: NonNull<sys::accel_optimizer_t>,
    /// The step function of `external`, which the library calls until the optimizer is freed.
    external_step: Option<Arc<dyn KeptPayload>>,
}

/// A run of a parameter's elements that this process steps (`Optimizer::pieces`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub parameter: String,
    /// The first of the parameter's flattened elements, and how many.
    pub begin: i64,
    pub numel: i64,
}

// SAFETY: optimizer.h: one thread at a time per optimizer and its schedulers (Optimizer is not Sync); the
// external step is Send and runs on the thread that steps.
unsafe impl Send for Optimizer {}

impl Optimizer {
    /// An optimizer of `kind` ("sgd", "adam", "adamw") over a prepared model's trainable parameters.
    pub fn new(model: &Model, kind: &str, options: Option<&Options>) -> Result<Optimizer> {
        let kind = to_c("optimizer kind", kind)?;
        let ptr = new_handle(|out| unsafe { sys::accel_optimizer_new(out, model.as_ptr(), kind.as_ptr(), options_ptr(options)) })?;
        Ok(Optimizer { ptr, external_step: None })
    }

    /// An optimizer whose steps the caller's own takes, over a prepared model of the caller's tensors
    /// (`Model::from_tensors`): `step` runs on sync steps and must update exactly the elements `pieces`
    /// lists, reading their gradients where the caller's tensors hold them; under `zero_stage` 1 or 2 every
    /// process's updated elements are then gathered to every process. An error or a panic of `step` fails
    /// the step with ACCEL_ERR_CALLBACK.
    pub fn external<F>(model: &Model, step: F) -> Result<Optimizer>
    where
        F: FnMut() -> CallbackResult<()> + Send + 'static,
    {
        let payload = Arc::new(Payload { failures: Failures::default(), function: Mutex::new(step) });
        let context = Arc::as_ptr(&payload) as *mut c_void;
        let kept: Option<Arc<dyn KeptPayload>> = Some(payload);
        let made = new_handle(|out| unsafe {
            sys::accel_optimizer_new_external(out, model.as_ptr(), Some(external_step_trampoline::<F>), context)
        });
        let ptr = explain(&kept, made)?;
        Ok(Optimizer { ptr, external_step: kept })
    }

    /// The runs of elements this process steps: every trainable parameter whole without ZeRO, this
    /// process's share under it.
    pub fn pieces(&self) -> Result<Vec<Piece>> {
        let count = unsafe { sys::accel_optimizer_num_pieces(self.as_ptr()) };
        (0..count)
            .map(|index| {
                let (mut name, mut begin, mut numel): (*const c_char, i64, i64) = (ptr::null(), 0, 0);
                check(unsafe { sys::accel_optimizer_piece(self.as_ptr(), index, &mut name, &mut begin, &mut numel) })?;
                Ok(Piece { parameter: from_c_or_empty(name), begin, numel })
            })
            .collect()
    }

    /// Piece `index`'s memory as a 1-d tensor (under zero_stage 3 this process's share of the parameter,
    /// its only values between uses) and, during the external step's callback, its gradient (None when it
    /// has none): what the program's own optimizer steps.
    pub fn piece_tensors(&self, index: usize) -> Result<(Tensor, Option<Tensor>)> {
        let (mut value, mut grad) = (ptr::null_mut(), ptr::null_mut());
        check(unsafe { sys::accel_optimizer_piece_tensors(self.as_ptr(), index, &mut value, &mut grad) })?;
        let value = NonNull::new(value).map(Tensor::from_raw).expect("ACCEL_OK comes with a value");
        Ok((value, NonNull::new(grad).map(Tensor::from_raw)))
    }

    /// Steps on a sync step (waiting for the gradients' all-reduce).
    pub fn step(&mut self) -> Result<()> {
        let result = one_at_a_time(|| check(unsafe { sys::accel_optimizer_step(self.as_ptr()) }));
        explain(&self.external_step, result)
    }

    /// Clears the gradients on a sync step.
    pub fn zero_grad(&mut self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_optimizer_zero_grad(self.as_ptr()) }))
    }

    /// Whether the last sync step was skipped because of an fp16 overflow.
    pub fn step_was_skipped(&self) -> bool {
        unsafe { sys::accel_optimizer_step_was_skipped(self.as_ptr()) != 0 }
    }

    pub fn num_groups(&self) -> usize {
        unsafe { sys::accel_optimizer_num_groups(self.as_ptr()) }
    }

    /// The learning rate of parameter group `group`.
    pub fn lr(&self, group: usize) -> Result<f64> {
        let mut lr = 0.0;
        check(unsafe { sys::accel_optimizer_lr(self.as_ptr(), group, &mut lr) })?;
        Ok(lr)
    }

    pub fn set_lr(&mut self, group: usize, lr: f64) -> Result<()> {
        check(unsafe { sys::accel_optimizer_set_lr(self.as_ptr(), group, lr) })
    }

    /// SGD's momentum or Adam's beta1 of parameter group `group` (what one_cycle cycles).
    pub fn momentum(&self, group: usize) -> Result<f64> {
        let mut momentum = 0.0;
        check(unsafe { sys::accel_optimizer_momentum(self.as_ptr(), group, &mut momentum) })?;
        Ok(momentum)
    }

    /// The (beta1, beta2) of parameter group `group` of an Adam or AdamW optimizer.
    pub fn betas(&self, group: usize) -> Result<(f64, f64)> {
        let (mut beta1, mut beta2) = (0.0, 0.0);
        check(unsafe { sys::accel_optimizer_betas(self.as_ptr(), group, &mut beta1, &mut beta2) })?;
        Ok((beta1, beta2))
    }

    /// The fp16 loss scale (1 without fp16); waits for the device.
    pub fn loss_scale(&self) -> Result<f64> {
        let mut scale = 0.0;
        check(unsafe { sys::accel_optimizer_loss_scale(self.as_ptr(), &mut scale) })?;
        Ok(scale)
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::accel_optimizer_t {
        self.ptr.as_ptr()
    }
}

impl Drop for Optimizer {
    fn drop(&mut self) {
        // The external step's payload is dropped after this, once the library can no longer call it.
        unsafe { sys::accel_optimizer_free(self.ptr.as_ptr()) }
    }
}

unsafe extern "C" fn external_step_trampoline<F>(context: *mut c_void) -> c_int
where
    F: FnMut() -> CallbackResult<()> + Send + 'static,
{
    // SAFETY: context is the Payload the optimizer keeps until it is freed.
    let payload = &*(context as *const Payload<Mutex<F>>);
    payload.failures.run(|| {
        let mut function = lock(&payload.function);
        (*function)()
    })
}
