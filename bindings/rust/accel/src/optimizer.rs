//! Optimizers (capi/accel/optimizer.h) with Accelerate's semantics: nothing happens on a step that
//! accumulates; under fp16 an overflowing step is skipped.
use std::ptr::NonNull;

use accel_sys as sys;

use crate::error::{check, Result};
use crate::handle::new_handle;
use crate::model::Model;
use crate::options::{options_ptr, Options};
use crate::serial::one_at_a_time;
use crate::strings::to_c;

pub struct Optimizer {
    ptr: NonNull<sys::accel_optimizer_t>,
}

// SAFETY: optimizer.h: one thread at a time per optimizer and its schedulers (Optimizer is not Sync).
unsafe impl Send for Optimizer {}

impl Optimizer {
    /// An optimizer of `kind` ("sgd", "adam", "adamw") over a prepared model's trainable parameters.
    pub fn new(model: &Model, kind: &str, options: Option<&Options>) -> Result<Optimizer> {
        let kind = to_c("optimizer kind", kind)?;
        let ptr = new_handle(|out| unsafe { sys::accel_optimizer_new(out, model.as_ptr(), kind.as_ptr(), options_ptr(options)) })?;
        Ok(Optimizer { ptr })
    }

    /// Steps on a sync step (waiting for the gradients' all-reduce).
    pub fn step(&mut self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_optimizer_step(self.as_ptr()) }))
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
        unsafe { sys::accel_optimizer_free(self.ptr.as_ptr()) }
    }
}
