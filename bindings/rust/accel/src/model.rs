//! TorchScript models (capi/accel/model.h): loading, prepare(model), forward and its outputs (models of the
//! program's own tensors: host_model.rs).
use std::os::raw::{c_char, c_int, c_void};
use std::path::Path;
use std::ptr::NonNull;

use accel_sys as sys;

use crate::error::{check, Result};
use crate::handle::new_handle;
use crate::options::{options_ptr, Options};
use crate::serial::one_at_a_time;
use crate::state::State;
use crate::strings::{from_c, path_to_c, to_c};
use crate::tensor::{handle_array, Tensor};

/// A TorchScript module run by the library, or a model of the program's own tensors (`Model::from_tensors`).
pub struct Model {
    ptr: NonNull<sys::accel_model_t>,
}

// SAFETY: model.h: a model is used by one thread at a time (Model is not Sync).
unsafe impl Send for Model {}

/// What forward returned: one tensor, a tuple or list, or a dict of tensors.
pub struct Output {
    ptr: NonNull<sys::accel_output_t>,
}

type ForwardCall = unsafe extern "C" fn(
    *mut sys::accel_model_t,
    *const *mut sys::accel_tensor_t,
    usize,
    *const *const c_char,
    *const *mut sys::accel_tensor_t,
    usize,
    *mut *mut sys::accel_output_t,
) -> c_int;

impl Model {
    /// Loads a TorchScript file (torch.jit.save), on the CPU, not prepared.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        let path = path_to_c(path.as_ref())?;
        let ptr = new_handle(|out| unsafe { sys::accel_model_load(out, path.as_ptr()) })?;
        Ok(Model { ptr })
    }

    /// Loads a TorchScript archive from memory.
    pub fn from_bytes(archive: &[u8]) -> Result<Model> {
        let ptr = new_handle(|out| unsafe { sys::accel_model_load_buffer(out, archive.as_ptr() as *const c_void, archive.len()) })?;
        Ok(Model { ptr })
    }

    /// forward(inputs...).
    pub fn forward(&self, inputs: &[&Tensor]) -> Result<Output> {
        self.call(sys::accel_model_forward, inputs, &[])
    }

    /// forward(inputs..., name=tensor...).
    pub fn forward_named(&self, inputs: &[&Tensor], named: &[(&str, &Tensor)]) -> Result<Output> {
        self.call(sys::accel_model_forward, inputs, named)
    }

    /// forward without building a graph, for evaluation.
    pub fn evaluate(&self, inputs: &[&Tensor]) -> Result<Output> {
        self.call(sys::accel_model_evaluate, inputs, &[])
    }

    pub fn evaluate_named(&self, inputs: &[&Tensor], named: &[(&str, &Tensor)]) -> Result<Output> {
        self.call(sys::accel_model_evaluate, inputs, named)
    }

    fn call(&self, forward: ForwardCall, inputs: &[&Tensor], named: &[(&str, &Tensor)]) -> Result<Output> {
        let positional = handle_array(inputs);
        let names = named.iter().map(|(name, _)| to_c("input name", name)).collect::<Result<Vec<_>>>()?;
        let name_pointers: Vec<*const c_char> = names.iter().map(|name| name.as_ptr()).collect();
        let named_tensors: Vec<&Tensor> = named.iter().map(|(_, tensor)| *tensor).collect();
        let named_pointers = handle_array(&named_tensors);
        // A prepared model's training forward broadcasts rank 0's buffers: collective.
        let ptr = one_at_a_time(|| {
            new_handle(|out| unsafe {
                forward(
                    self.as_ptr(),
                    positional.as_ptr(),
                    positional.len(),
                    name_pointers.as_ptr(),
                    named_pointers.as_ptr(),
                    named_pointers.len(),
                    out,
                )
            })
        })?;
        Ok(Output { ptr })
    }

    /// Training (true) or evaluation mode.
    pub fn set_training(&mut self, on: bool) -> Result<()> {
        check(unsafe { sys::accel_model_train(self.as_ptr(), on as i32) })
    }

    /// How `save_state` writes this prepared model from now on: "whole" (one file, by process 0) or "sharded"
    /// (each process its piece of every tensor, in parallel; FSDP's SHARDED_STATE_DICT), as the prepare
    /// option `checkpoint_model` chose. Either loads on any number of processes.
    pub fn set_checkpoint_model(&mut self, how: &str) -> Result<()> {
        let how = to_c("how", how)?;
        check(unsafe { sys::accel_model_set_checkpoint_model(self.as_ptr(), how.as_ptr()) })
    }

    pub fn is_training(&self) -> bool {
        unsafe { sys::accel_model_is_training(self.as_ptr()) != 0 }
    }

    pub fn num_parameters(&self) -> usize {
        unsafe { sys::accel_model_num_parameters(self.as_ptr()) }
    }

    /// The name of parameter `index` in registration order (a tensor several modules hold, tied weights,
    /// once, under its first name); None out of range.
    pub fn parameter_name(&self, index: usize) -> Option<String> {
        from_c(unsafe { sys::accel_model_parameter_name(self.as_ptr(), index) })
    }

    /// Parameter `index`, sharing the model's memory.
    pub fn parameter(&self, index: usize) -> Result<Tensor> {
        Tensor::make(|out| unsafe { sys::accel_model_parameter(self.as_ptr(), index, out) })
    }

    /// Writes `value`, the whole value of parameter `index` (its shape; converted to its dtype and device), into
    /// the model: under zero_stage 3 this process's share of it, otherwise the tensor. Not collective: every
    /// process passes the whole value, as every FSDP rank loads a full state dict.
    pub fn set_parameter(&mut self, index: usize, value: &Tensor) -> Result<()> {
        check(unsafe { sys::accel_model_set_parameter(self.as_ptr(), index, value.as_ptr()) })
    }

    pub fn num_buffers(&self) -> usize {
        unsafe { sys::accel_model_num_buffers(self.as_ptr()) }
    }

    pub fn buffer_name(&self, index: usize) -> Option<String> {
        from_c(unsafe { sys::accel_model_buffer_name(self.as_ptr(), index) })
    }

    /// Buffer `index`, sharing the model's memory.
    pub fn buffer(&self, index: usize) -> Result<Tensor> {
        Tensor::make(|out| unsafe { sys::accel_model_buffer(self.as_ptr(), index, out) })
    }

    /// Every parameter and buffer by name, copies of their whole values, in the order `save_model` writes
    /// them (a tensor several modules hold, once). Under zero_stage 3 they are gathered unit by unit:
    /// collective, every process calls it, and one with `keep` false gets an empty list.
    pub fn whole_tensors(&mut self, keep: bool) -> Result<Vec<(String, Tensor)>> {
        let mut whole: Vec<(String, Tensor)> = Vec::new();
        let payload = &mut whole as *mut Vec<(String, Tensor)> as *mut c_void;
        let each = if keep { Some(keep_whole_tensor as WholeTensorCall) } else { None };
        check(unsafe { sys::accel_model_each_whole_tensor(self.as_ptr(), c_int::from(keep), each, payload) })?;
        Ok(whole)
    }

    /// What the gradient all-reduces cost, one figure by name: syncs, bytes, copied_bytes, reduce_ms,
    /// overlapped_ms, exposed_ms, wait_ms, helper_cpu_ms (totals since prepare), each also with the prefix
    /// last_ (the last synchronising backward's); and gradient_bytes, optimizer_state_bytes (the memory
    /// ZeRO's zero_stage splits, on this process). 0 when the model is not data-parallel.
    pub fn grad_sync_stat(&self, name: &str) -> Result<f64> {
        let name = to_c("figure name", name)?;
        let mut value = 0.0;
        check(unsafe { sys::accel_model_grad_sync_stat(self.as_ptr(), name.as_ptr(), &mut value) })?;
        Ok(value)
    }

    /// The plain module without the data-parallel wrapper (same parameters).
    pub fn unwrap_model(&self) -> Result<Model> {
        let ptr = new_handle(|out| unsafe { sys::accel_model_unwrap(self.as_ptr(), out) })?;
        Ok(Model { ptr })
    }

    /// Writes the module as TorchScript (loadable by torch.jit.load).
    pub fn save_torchscript(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path_to_c(path.as_ref())?;
        check(unsafe { sys::accel_model_save_torchscript(self.as_ptr(), path.as_ptr()) })
    }

    /// Loads what `State::save_model` wrote into `directory` (model.safetensors, or the index and its
    /// shards), onto each tensor's device. Everything is checked first, so on an error nothing changed.
    pub fn load_weights(&mut self, directory: impl AsRef<Path>) -> Result<()> {
        let directory = path_to_c(directory.as_ref())?;
        check(unsafe { sys::accel_model_load_weights(self.as_ptr(), directory.as_ptr()) })
    }

    pub(crate) fn from_raw(ptr: NonNull<sys::accel_model_t>) -> Model {
        Model { ptr }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::accel_model_t {
        self.ptr.as_ptr()
    }
}

type WholeTensorCall = unsafe extern "C" fn(*const c_char, *mut sys::accel_tensor_t, *mut c_void) -> c_int;

/// accel_model_each_whole_tensor's callback for whole_tensors: the tensor (owned from here) kept under its name.
unsafe extern "C" fn keep_whole_tensor(name: *const c_char, tensor: *mut sys::accel_tensor_t, context: *mut c_void) -> c_int {
    let tensor = match NonNull::new(tensor) {
        Some(tensor) => Tensor::from_raw(tensor),
        None => return 1,
    };
    // SAFETY: context is whole_tensors' Vec, alive and not otherwise borrowed for the call.
    let whole = &mut *(context as *mut Vec<(String, Tensor)>);
    match from_c(name) {
        Some(name) => {
            whole.push((name, tensor));
            0
        }
        None => 1,
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { sys::accel_model_free(self.ptr.as_ptr()) }
    }
}

impl Output {
    pub fn count(&self) -> usize {
        unsafe { sys::accel_output_count(self.ptr.as_ptr()) }
    }

    /// The key of entry `index` of a dict output; None otherwise.
    pub fn name(&self, index: usize) -> Option<String> {
        from_c(unsafe { sys::accel_output_name(self.ptr.as_ptr(), index) })
    }

    pub fn get(&self, index: usize) -> Result<Tensor> {
        Tensor::make(|out| unsafe { sys::accel_output_get(self.ptr.as_ptr(), index, out) })
    }

    /// The dict entry called `name`.
    pub fn get_named(&self, name: &str) -> Result<Tensor> {
        let name = to_c("output name", name)?;
        Tensor::make(|out| unsafe { sys::accel_output_get_named(self.ptr.as_ptr(), name.as_ptr(), out) })
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        unsafe { sys::accel_output_free(self.ptr.as_ptr()) }
    }
}

impl State {
    /// prepare(model): on the device, rank 0's weights everywhere, gradients averaged over the ranks
    /// (collective), with the model keys of `options`.
    pub fn prepare_model(&self, model: &mut Model, options: Option<&Options>) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_prepare_model(self.as_ptr(), model.as_ptr(), options_ptr(options)) }))
    }
}
