//! Losses computed by the library (capi/accel/loss.h), for losses not in the TorchScript model.
use accel_sys as sys;

use crate::error::Result;
use crate::options::{options_ptr, Options};
use crate::strings::to_c;
use crate::tensor::Tensor;

/// The loss `name` ("cross_entropy", "nll", "mse", "l1", "bce_with_logits") of input against target,
/// with the loss keys of `options` (reduction, label_smoothing, ignore_index).
pub fn compute_loss(name: &str, input: &Tensor, target: &Tensor, options: Option<&Options>) -> Result<Tensor> {
    let name = to_c("loss name", name)?;
    Tensor::make(|out| unsafe { sys::accel_loss_compute(out, name.as_ptr(), input.as_ptr(), target.as_ptr(), options_ptr(options)) })
}
