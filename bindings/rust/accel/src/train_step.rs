//! Training steps (capi/accel/train_step.h): forward, loss, backward, clipping, the optimizer step and
//! zero_grad as one call, run eagerly or, with the option cuda_graph on a GPU, captured once as a CUDA
//! graph and replayed for every later batch of the same layout.
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

use accel_sys as sys;

use crate::error::{check, Result};
use crate::handle::new_handle;
use crate::model::Model;
use crate::optimizer::Optimizer;
use crate::options::{options_ptr, Options};
use crate::serial::one_at_a_time;
use crate::strings::{from_c_or_empty, to_c};
use crate::tensor::{handle_array, Tensor};

/// A step training a prepared model with an optimizer made from it (the library keeps both alive).
pub struct TrainStep {
    ptr: NonNull<sys::accel_train_step_t>,
}

// SAFETY: train_step.h: one thread at a time per step (TrainStep is not Sync), and not while another thread
// trains the same model: `run` holds the crate's lock, as forward and the optimizer's step do.
unsafe impl Send for TrainStep {}

impl TrainStep {
    /// A step with the train step keys of `options`: loss ("cross_entropy", "nll", "mse", "l1",
    /// "bce_with_logits", or "output" for a model whose forward returns the loss), reduction,
    /// label_smoothing, ignore_index, max_grad_norm, norm_type, cuda_graph, cuda_graph_warmup.
    pub fn new(model: &Model, optimizer: &Optimizer, options: Option<&Options>) -> Result<TrainStep> {
        let ptr = new_handle(|out| unsafe { sys::accel_train_step_new(out, model.as_ptr(), optimizer.as_ptr(), options_ptr(options)) })?;
        Ok(TrainStep { ptr })
    }

    /// One step on a batch: forward(inputs..., name=tensor...), the loss against `target` (None for the
    /// loss "output"), backward, clipping, the optimizer step and zero_grad. Returns the loss, a tensor of
    /// its own (reading it waits for the device; the step itself does not).
    pub fn run(&mut self, inputs: &[&Tensor], named: &[(&str, &Tensor)], target: Option<&Tensor>) -> Result<Tensor> {
        let positional = handle_array(inputs);
        let names = named.iter().map(|(name, _)| to_c("input name", name)).collect::<Result<Vec<_>>>()?;
        let name_pointers: Vec<*const c_char> = names.iter().map(|name| name.as_ptr()).collect();
        let named_tensors: Vec<&Tensor> = named.iter().map(|(_, tensor)| *tensor).collect();
        let named_pointers = handle_array(&named_tensors);
        let target = target.map_or(ptr::null(), |tensor| tensor.as_ptr() as *const sys::accel_tensor_t);
        // Forward broadcasts buffers and backward all-reduces gradients: collective.
        one_at_a_time(|| {
            Tensor::make(|loss| unsafe {
                sys::accel_train_step_run(
                    self.ptr.as_ptr(),
                    positional.as_ptr(),
                    positional.len(),
                    name_pointers.as_ptr(),
                    named_pointers.as_ptr(),
                    named_pointers.len(),
                    target,
                    loss,
                )
            })
        })
    }

    /// Why the last step did not replay a CUDA graph; "" when it did.
    pub fn eager_reason(&self) -> String {
        from_c_or_empty(unsafe { sys::accel_train_step_eager_reason(self.ptr.as_ptr()) })
    }

    /// A count by name: "steps", "replays" (the capturing step included), "captures", "warmup_steps",
    /// "eager_steps".
    pub fn stat(&self, name: &str) -> Result<u64> {
        let name = to_c("figure name", name)?;
        let mut value = 0.0;
        check(unsafe { sys::accel_train_step_stat(self.ptr.as_ptr(), name.as_ptr(), &mut value) })?;
        Ok(value as u64)
    }
}

impl Drop for TrainStep {
    fn drop(&mut self) {
        unsafe { sys::accel_train_step_free(self.ptr.as_ptr()) }
    }
}
