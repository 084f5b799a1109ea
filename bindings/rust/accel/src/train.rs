//! The training step (capi/accel/train.h): accumulate, backward, clipping, save_model.
use std::path::Path;

use accel_sys as sys;

use crate::error::{check, Result};
use crate::model::Model;
use crate::serial::one_at_a_time;
use crate::state::State;
use crate::strings::path_to_c;
use crate::tensor::Tensor;

impl State {
    /// Accelerate's accumulate(model): call at the start of each step; decides whether it synchronises.
    pub fn accumulate(&self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_accumulate(self.as_ptr()) }))
    }

    /// Whether the current step synchronises gradients and steps the optimizer.
    pub fn sync_gradients(&self) -> bool {
        one_at_a_time(|| unsafe { sys::accel_state_sync_gradients(self.as_ptr()) != 0 })
    }

    /// This handle's gradient_accumulation_steps: what backward divides the loss by.
    pub fn gradient_accumulation_steps(&self) -> i64 {
        one_at_a_time(|| unsafe { sys::accel_state_gradient_accumulation_steps(self.as_ptr()) })
    }

    /// Sets this handle's accumulation from the next accumulate on (Accelerate's setter). Errors: steps < 1.
    pub fn set_gradient_accumulation_steps(&self, steps: i64) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_set_gradient_accumulation_steps(self.as_ptr(), steps) }))
    }

    /// Sets whether the current step synchronises, until the next accumulate decides again (the process's
    /// flag, which every handle of the state reads).
    pub fn set_sync_gradients(&self, sync: bool) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_set_sync_gradients(self.as_ptr(), i32::from(sync)) }))
    }

    /// Backward of loss / gradient_accumulation_steps (scaled under fp16); gradients averaged over the
    /// ranks on a sync step.
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_backward(self.as_ptr(), loss.as_ptr()) }))
    }

    /// Backward of a loss summed over this micro-batch's items, normalised by `num_items`, the items of the
    /// whole accumulated global batch (every micro-batch of the optimizer step, on every rank): the
    /// gradient is that of the full batch's mean loss, however unevenly the items fall.
    pub fn backward_with_items(&self, loss: &Tensor, num_items: usize) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_backward_with_items(self.as_ptr(), loss.as_ptr(), num_items) }))
    }

    /// Accelerate's no_sync(model): backwards of forwards run in `work` only accumulate gradients on this
    /// process (no all-reduce); the next synchronising backward averages the sum.
    pub fn no_sync<T>(&self, model: &mut Model, work: impl FnOnce(&mut Model) -> T) -> Result<T> {
        one_at_a_time(|| check(unsafe { sys::accel_state_no_sync_begin(self.as_ptr(), model.as_ptr()) }))?;
        let result = work(model);
        one_at_a_time(|| check(unsafe { sys::accel_state_no_sync_end(self.as_ptr(), model.as_ptr()) }))?;
        Ok(result)
    }

    /// Accelerate's autocast(): the library's operations on this thread in `work` (a loss computed
    /// outside the model's forward) run under the state's mixed precision.
    pub fn autocast<T>(&self, work: impl FnOnce() -> T) -> Result<T> {
        self.section(sys::accel_state_autocast_begin, sys::accel_state_autocast_end, work)
    }

    /// Accelerate's free_memory for what the state holds: the accumulation counter restarts, loaders in an
    /// epoch are no longer tracked, and CUDA's cached blocks are returned.
    pub fn free_memory(&self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_free_memory(self.as_ptr()) }))
    }

    /// The fp16 loss scale, for a model of the program's tensors trained by an optimizer that is not
    /// accel's: a 0-dim float32 tensor on the state's device (the same memory every call; 1 without fp16
    /// loss scaling) to multiply the loss by before the program's backward.
    pub fn grad_scale(&self) -> Result<Tensor> {
        one_at_a_time(|| Tensor::make(|out| unsafe { sys::accel_state_grad_scale(self.as_ptr(), out) }))
    }

    /// Divides the model's gradients by the loss scale, once per optimizer step before clipping; true when
    /// any holds inf or NaN (skip the step then). Without fp16 loss scaling nothing changes: false.
    pub fn unscale_gradients(&self, model: &mut Model) -> Result<bool> {
        let mut found_inf = 0;
        one_at_a_time(|| check(unsafe { sys::accel_state_unscale_gradients(self.as_ptr(), model.as_ptr(), &mut found_inf) }))?;
        Ok(found_inf != 0)
    }

    /// GradScaler.update: the scale grows or backs off after a step that was taken (`found_inf` false) or
    /// skipped (true). Without fp16 loss scaling, nothing.
    pub fn update_grad_scale(&self, found_inf: bool) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_update_grad_scale(self.as_ptr(), found_inf as i32) }))
    }

    /// Clips the gradients' total `norm_type`-norm to `max_norm`; returns the norm before clipping.
    pub fn clip_grad_norm(&self, model: &mut Model, max_norm: f64, norm_type: f64) -> Result<f64> {
        let mut total_norm = 0.0;
        one_at_a_time(|| {
            check(unsafe { sys::accel_state_clip_grad_norm(self.as_ptr(), model.as_ptr(), max_norm, norm_type, &mut total_norm) })
        })?;
        Ok(total_norm)
    }

    /// Clamps every gradient to [-clip_value, clip_value].
    pub fn clip_grad_value(&self, model: &mut Model, clip_value: f64) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_clip_grad_value(self.as_ptr(), model.as_ptr(), clip_value) }))
    }

    /// Accelerate's save_model, on the main process (collective): the unwrapped model's weights in
    /// directory/model.safetensors, or, above `max_shard_size` bytes (0: Accelerate's 10 GB), in
    /// model-0000i-of-0000N.safetensors shards with model.safetensors.index.json. Tied weights are
    /// stored once. `Model::load_weights` reads them back.
    pub fn save_model(&self, model: &Model, directory: impl AsRef<Path>, max_shard_size: usize) -> Result<()> {
        let directory = path_to_c(directory.as_ref())?;
        one_at_a_time(|| check(unsafe { sys::accel_state_save_model(self.as_ptr(), model.as_ptr(), directory.as_ptr(), max_shard_size) }))
    }
}
