//! Models whose tensors are the program's own (capi/accel/model.h, `accel_model_from_tensors`): Rust-owned
//! buffers lent through `Tensor::from_vec`, or DLPack tensors of another runtime. Their forward and backward
//! run in the program, which tells the model about them as DDP's hooks would: `begin_forward` before each
//! forward, the gradient written (accumulated) into `grad_view`'s storage, `grad_ready` per parameter once
//! its gradient is final, `end_backward` after the last. Everything else (optimizers, accumulation and
//! no_sync, clipping, the grad scaler, save_state and save_model) takes them as any prepared model.
use std::os::raw::{c_char, c_int};

use accel_sys as sys;

use crate::error::{check, Error, Result};
use crate::handle::new_handle;
use crate::model::Model;
use crate::serial::one_at_a_time;
use crate::strings::to_c;
use crate::tensor::{handle_array, Tensor};

impl Model {
    /// A model of `parameters` (name, tensor) and `buffers`, whose memory stays the caller's: shared, never
    /// copied, kept alive by the model. `trainable` gives one flag per parameter (false: frozen, as
    /// requires_grad False); None makes every parameter trainable. `State::prepare_model` then copies rank
    /// 0's values into every rank's tensors in place and gives each trainable parameter its gradient storage
    /// (`grad_view`). Errors: a repeated or empty name, a trainable parameter that is not floating
    /// (ACCEL_ERR_INVALID_ARGUMENT), `trainable` of another length than `parameters`.
    pub fn from_tensors(parameters: &[(&str, &Tensor)], trainable: Option<&[bool]>, buffers: &[(&str, &Tensor)]) -> Result<Model> {
        if let Some(flags) = trainable {
            if flags.len() != parameters.len() {
                return Err(Error::new(
                    sys::ACCEL_ERR_INVALID_ARGUMENT,
                    format!("{} trainable flags for {} parameters", flags.len(), parameters.len()),
                ));
            }
        }
        let flags: Option<Vec<c_int>> = trainable.map(|flags| flags.iter().map(|&on| on as c_int).collect());
        // The owned names (_names, _buffer_names) live until the call has returned.
        let (_names, name_pointers, tensors) = named_arrays("parameter name", parameters)?;
        let (_buffer_names, buffer_name_pointers, buffer_tensors) = named_arrays("buffer name", buffers)?;
        let ptr = new_handle(|out| unsafe {
            sys::accel_model_from_tensors(
                out,
                name_pointers.as_ptr(),
                tensors.as_ptr(),
                flags.as_ref().map_or(std::ptr::null(), |flags| flags.as_ptr()),
                tensors.len(),
                buffer_name_pointers.as_ptr(),
                buffer_tensors.as_ptr(),
                buffer_tensors.len(),
            )
        })?;
        Ok(Model::from_raw(ptr))
    }

    /// Call before each of the program's forwards (`grad_enabled` false for evaluation): with several
    /// processes it may send rank 0's buffers (collective, on every rank alike) and decides whether the
    /// coming backward synchronises.
    pub fn begin_forward(&mut self, grad_enabled: bool) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_model_begin_forward(self.as_ptr(), grad_enabled as c_int) }))
    }

    /// Parameter `index`'s gradient storage, the same memory every step (with several processes a view into
    /// its gradient bucket): the program's backward accumulates the gradient there in place (see
    /// `Tensor::as_mut_slice`); the optimizer, clipping and save_state read it there.
    pub fn grad_view(&self, index: usize) -> Result<Tensor> {
        Tensor::make(|out| unsafe { sys::accel_model_grad_view(self.as_ptr(), index, out) })
    }

    /// Parameter `index`'s gradient of this backward is final: once its whole bucket is, the bucket's
    /// all-reduce starts, overlapping the rest of the backward. Repeats are ignored; outside a synchronising
    /// backward nothing happens.
    pub fn grad_ready(&mut self, index: usize) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_model_grad_ready(self.as_ptr(), index) }))
    }

    /// The backward is over: on a synchronising one, waits for the all-reduces, after which every gradient
    /// holds the average over the ranks. A parameter never marked ready is an error naming it, unless the
    /// model was prepared with find_unused_parameters.
    pub fn end_backward(&mut self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_model_end_backward(self.as_ptr()) }))
    }

    /// ZeRO stage 3 (prepare option `zero_stage` 3, several processes; capi/accel/model.h,
    /// `accel_model_set_units`), before `State::prepare_model`: per parameter, the unit it is gathered in
    /// (numbered from 0; one unit of every trainable parameter without this call). After prepare the model
    /// holds each process's share only, and the program holds a unit's values in a buffer of the unit's
    /// layout while it uses the unit: `unit_gather` fills it, `unit_reduce` hands the unit's gradients over.
    pub fn set_units(&mut self, unit_of_parameter: &[i32]) -> Result<()> {
        check(unsafe { sys::accel_model_set_units(self.as_ptr(), unit_of_parameter.as_ptr(), unit_of_parameter.len()) })
    }

    /// The number of units of a model sharded under zero_stage 3; 0 for one that is not (one process, another stage).
    pub fn num_units(&self) -> usize {
        unsafe { sys::accel_model_num_units(self.as_ptr()) }
    }

    /// The elements of unit `unit`'s layout (what its buffer holds).
    pub fn unit_numel(&self, unit: usize) -> Result<i64> {
        let mut out = 0i64;
        check(unsafe { sys::accel_model_unit_numel(self.as_ptr(), unit, &mut out) })?;
        Ok(out)
    }

    /// Parameter `index`'s unit and the first of its elements in that unit's layout.
    pub fn parameter_place(&self, index: usize) -> Result<(usize, i64)> {
        let (mut unit, mut offset) = (0usize, 0i64);
        check(unsafe { sys::accel_model_parameter_place(self.as_ptr(), index, &mut unit, &mut offset) })?;
        Ok((unit, offset))
    }

    /// Fills `full` (1-d, `unit_numel` elements) with every process's share of the unit's parameters.
    /// Collective.
    pub fn unit_gather(&mut self, unit: usize, full: &Tensor) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_model_unit_gather(self.as_ptr(), unit, full.as_ptr()) }))
    }

    /// Fills `full` (the unit's layout, of its parameters' dtype) with the unit's averaged gradients, zeros
    /// where no process holds any: false when no process holds gradients of the unit (before its first
    /// synchronising backward, after a zero_grad that set them to none). Collective.
    pub fn unit_gather_gradients(&mut self, unit: usize, full: &Tensor) -> Result<bool> {
        let mut present: c_int = 0;
        one_at_a_time(|| {
            check(unsafe { sys::accel_model_unit_gather_gradients(self.as_ptr(), unit, full.as_ptr(), &mut present) })
        })?;
        Ok(present != 0)
    }

    /// Starts `unit_gather(unit, full)` and returns before it is done (collective), so that it travels while
    /// the program computes with another unit: the unit's next `unit_gather` only waits for it.
    ///
    /// # Safety
    /// `full`'s memory must stay alive and untouched until that `unit_gather` or the end of the backward
    /// (`end_backward` waits for the prefetches left and forgets them): the library writes into it meanwhile.
    pub unsafe fn unit_prefetch(&mut self, unit: usize, full: &Tensor) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_model_unit_prefetch(self.as_ptr(), unit, full.as_ptr()) }))
    }

    /// Hands the unit's gradients of this backward over (`full_gradients`: the unit's layout, zeros where
    /// there are none; overwritten): true when averaged into this process's share (a synchronising
    /// backward; collective), false when the backward only accumulates (keep them and add the next
    /// backward's).
    pub fn unit_reduce(&mut self, unit: usize, full_gradients: &Tensor) -> Result<bool> {
        let mut reduced: c_int = 0;
        one_at_a_time(|| {
            check(unsafe { sys::accel_model_unit_reduce(self.as_ptr(), unit, full_gradients.as_ptr(), &mut reduced) })
        })?;
        Ok(reduced != 0)
    }

    /// Whether no rank's backward reached parameter `index` in the last synchronising backward
    /// (find_unused_parameters): its gradient was left as it was.
    pub fn grad_reached_by_no_rank(&self, index: usize) -> Result<bool> {
        let mut out: c_int = 0;
        check(unsafe { sys::accel_model_grad_reached_by_no_rank(self.as_ptr(), index, &mut out) })?;
        Ok(out != 0)
    }
}

type NamedArrays = (Vec<std::ffi::CString>, Vec<*const c_char>, Vec<*mut sys::accel_tensor_t>);

/// The names (owned, and as the pointers C reads, valid while the owned ones live) and the tensor handles.
fn named_arrays(what: &str, named: &[(&str, &Tensor)]) -> Result<NamedArrays> {
    let names = named.iter().map(|(name, _)| to_c(what, name)).collect::<Result<Vec<_>>>()?;
    let pointers = names.iter().map(|name| name.as_ptr()).collect();
    let tensors: Vec<&Tensor> = named.iter().map(|(_, tensor)| *tensor).collect();
    Ok((names, pointers, handle_array(&tensors)))
}
