//! Collectives across the processes of a state (capi/accel/collectives.h): every rank calls the same
//! ones in the same order; with one process they work locally.
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};

use accel_sys as sys;

use crate::error::{check, Result};
use crate::handle::new_handle;
use crate::serial::one_at_a_time;
use crate::state::State;
use crate::strings::to_c;
use crate::tensor::Tensor;

/// How `State::reduce` combines the ranks' tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    /// Needs a floating dtype.
    Mean,
    Max,
}

impl Reduction {
    fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Mean => "mean",
            Reduction::Max => "max",
        }
    }
}

/// The byte strings `accel_state_gather_bytes` returns, freed on drop.
struct BytesList {
    ptr: NonNull<sys::accel_bytes_list_t>,
}

impl BytesList {
    fn to_vecs(&self) -> Result<Vec<Vec<u8>>> {
        let count = unsafe { sys::accel_bytes_list_count(self.ptr.as_ptr()) };
        (0..count)
            .map(|index| {
                let (mut data, mut size) = (ptr::null::<c_void>(), 0usize);
                check(unsafe { sys::accel_bytes_list_get(self.ptr.as_ptr(), index, &mut data, &mut size) })?;
                if size == 0 {
                    return Ok(Vec::new());
                }
                // SAFETY: size bytes owned by the list, which outlives this copy.
                Ok(unsafe { std::slice::from_raw_parts(data as *const u8, size) }.to_vec())
            })
            .collect()
    }
}

impl Drop for BytesList {
    fn drop(&mut self) {
        unsafe { sys::accel_bytes_list_free(self.ptr.as_ptr()) }
    }
}

impl State {
    /// Every rank's tensor concatenated along dim 0, in rank order; row counts may differ between ranks
    /// (no padding needed), the other sizes may not.
    pub fn gather(&self, input: &Tensor) -> Result<Tensor> {
        one_at_a_time(|| Tensor::make(|out| unsafe { sys::accel_state_gather(self.as_ptr(), input.as_ptr(), out) }))
    }

    /// Every rank's bytes, in rank order (any lengths, 0 included).
    pub fn gather_bytes(&self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        let list = one_at_a_time(|| {
            new_handle(|out| unsafe { sys::accel_state_gather_bytes(self.as_ptr(), data.as_ptr() as *const c_void, data.len(), out) })
        })?;
        BytesList { ptr: list }.to_vecs()
    }

    /// The element-wise reduction over the ranks.
    pub fn reduce(&self, input: &Tensor, reduction: Reduction) -> Result<Tensor> {
        let reduction = to_c("reduction", reduction.name())?;
        one_at_a_time(|| Tensor::make(|out| unsafe { sys::accel_state_reduce(self.as_ptr(), input.as_ptr(), reduction.as_ptr(), out) }))
    }

    /// `reduce` over many tensors at once, each named by its path in the caller's structure (unique
    /// names): one exchange of names, shapes and dtypes, then one all-reduce per dtype. The results come
    /// in the order of `inputs`.
    pub fn reduce_named(&self, inputs: &[(&str, &Tensor)], reduction: Reduction) -> Result<Vec<Tensor>> {
        let reduction = to_c("reduction", reduction.name())?;
        let names = inputs.iter().map(|(name, _)| to_c("name", name)).collect::<Result<Vec<_>>>()?;
        let name_pointers: Vec<*const c_char> = names.iter().map(|name| name.as_ptr()).collect();
        let handles: Vec<*mut sys::accel_tensor_t> = inputs.iter().map(|(_, tensor)| tensor.as_ptr()).collect();
        let mut outputs: Vec<*mut sys::accel_tensor_t> = vec![ptr::null_mut(); inputs.len()];
        one_at_a_time(|| {
            check(unsafe {
                sys::accel_state_reduce_named(
                    self.as_ptr(),
                    name_pointers.as_ptr(),
                    handles.as_ptr(),
                    inputs.len(),
                    reduction.as_ptr(),
                    outputs.as_mut_ptr(),
                )
            })
        })?;
        // On success the library filled every slot with a new handle.
        Ok(outputs.into_iter().filter_map(NonNull::new).map(Tensor::from_raw).collect())
    }

    /// Overwrites `tensor` on every rank with rank `from_process`'s values, in place.
    pub fn broadcast(&self, tensor: &mut Tensor, from_process: i32) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_broadcast(self.as_ptr(), tensor.as_ptr(), from_process) }))
    }

    /// Writes into `output`, in place, this rank's share of the element-wise sum or mean of every rank's
    /// `input` (PyTorch's reduce_scatter_tensor): with n elements in `output`, elements
    /// [rank * n, (rank + 1) * n) of the reduction. `Reduction::Max` is refused (ACCEL_ERR_INVALID_ARGUMENT).
    pub fn reduce_scatter(&self, input: &Tensor, output: &mut Tensor, reduction: Reduction) -> Result<()> {
        let reduction = to_c("reduction", reduction.name())?;
        one_at_a_time(|| {
            check(unsafe { sys::accel_state_reduce_scatter(self.as_ptr(), input.as_ptr(), reduction.as_ptr(), output.as_ptr()) })
        })
    }

    /// Writes into `output`, in place, every rank's `input` in rank order (PyTorch's
    /// all_gather_into_tensor): `output` has `input`'s dtype and num_processes times its elements.
    pub fn all_gather(&self, input: &Tensor, output: &mut Tensor) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_all_gather(self.as_ptr(), input.as_ptr(), output.as_ptr()) }))
    }

    /// Pads `dim` (negative counts from the end) to the largest size any rank has, with `pad_value`, at
    /// the end or, with `pad_first`, at the start.
    pub fn pad_across_processes(&self, input: &Tensor, dim: i64, pad_value: f64, pad_first: bool) -> Result<Tensor> {
        one_at_a_time(|| {
            Tensor::make(|out| unsafe {
                sys::accel_state_pad_across_processes(self.as_ptr(), input.as_ptr(), dim, pad_value, pad_first as i32, out)
            })
        })
    }

    /// `gather`, without the samples that padded the last global batch of the active loader.
    pub fn gather_for_metrics(&self, input: &Tensor) -> Result<Tensor> {
        one_at_a_time(|| Tensor::make(|out| unsafe { sys::accel_state_gather_for_metrics(self.as_ptr(), input.as_ptr(), out) }))
    }
}
