//! Hugging Face Accelerate's training loop on libaccel, from Rust.
//!
//! Every library object is a Rust value whose `Drop` frees its handle (the library keeps parents alive,
//! so drop order never matters); every fallible call returns [`Result`] with the library's code and
//! message; loaders are iterators; tensors cross as copies of slices ([`Tensor::from_slice`],
//! [`Tensor::to_vec`]) or without a copy through DLPack ([`Tensor::to_dlpack`], [`Tensor::from_vec`]).
//! Types are `Send`/`Sync` only as far as their header's "Thread safety" section allows; calls that must
//! not race (collectives, the training step) are serialised by the crate.
//!
//! ```no_run
//! use accel::{compute_loss, Dataset, Loader, Model, Optimizer, Options, State, Tensor};
//!
//! # fn main() -> accel::Result<()> {
//! let state = State::new(None)?;                 // RANK, WORLD_SIZE, ... as `accel launch` sets them
//! let x = Tensor::from_slice(&[0.0f32; 64 * 4], &[64, 4])?;
//! let y = Tensor::from_slice(&[0i64; 64], &[64])?;
//! let data = Dataset::from_tensors(&[("x", &x), ("y", &y)])?;
//! let mut loader = Loader::new(&state, &data, Some(&Options::from_text(&[("batch_size", "8")])?))?;
//! let mut model = Model::load("model.pt")?;
//! state.prepare_model(&mut model, None)?;
//! let mut optimizer = Optimizer::new(&model, "sgd", None)?;
//! for batch in &mut loader {
//!     let batch = batch?;
//!     state.accumulate()?;
//!     let logits = model.forward(&[&batch.get("x")?])?.get(0)?;
//!     state.backward(&compute_loss("cross_entropy", &logits, &batch.get("y")?, None)?)?;
//!     optimizer.step()?;
//!     optimizer.zero_grad()?;
//! }
//! state.shutdown()?;
//! # Ok(())
//! # }
//! ```
pub use accel_sys as sys;

mod callbacks;
mod checkpoint;
mod collectives;
mod dataset;
mod dealing;
mod dlpack;
mod error;
mod handle;
mod host_model;
mod loader;
mod loss;
mod model;
mod optimizer;
mod options;
mod processes;
mod scheduler;
mod serial;
mod state;
mod strings;
mod tensor;
mod tracking;
mod train;
mod train_step;
pub mod version;

pub use checkpoint::{Checkpointed, SavedParts};
pub use collectives::Reduction;
pub use dataset::{Dataset, ItemStream, Sample};
pub use dealing::Dealer;
pub use dlpack::DlpackTensor;
pub use error::{CallbackResult, Error, Result};
pub use loader::{Batch, Loader};
pub use loss::compute_loss;
pub use model::{Model, Output};
pub use optimizer::{Optimizer, Piece};
pub use options::Options;
pub use processes::RangeShare;
pub use scheduler::Scheduler;
pub use state::{DistributedType, State};
pub use tensor::{DType, Element, Tensor};
pub use tracking::Progress;
pub use train_step::TrainStep;
