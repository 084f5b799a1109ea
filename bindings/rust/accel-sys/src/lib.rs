//! Raw declarations of libaccel's C ABI: one module per header of capi/accel/, in the order of the
//! umbrella header capi/accel.h, each declaring what its header does in the header's order (the test
//! tests/declarations_match_headers.rs compares them). The documentation of every function (ownership,
//! errors, thread safety) is in its header; the safe API is the `accel` crate.
#![allow(non_camel_case_types, non_upper_case_globals)]

/// Declares an opaque C handle type: never built or read by Rust, only pointed to (the layout the
/// Rustonomicon recommends: neither Send, Sync nor Unpin).
macro_rules! opaque {
    ($name:ident) => {
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
            _not_send_sync_unpin: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
        }
    };
}

pub mod common;
pub mod version;
pub mod options;
pub mod state;
pub mod tensor;
pub mod collectives;
pub mod processes;
pub mod loader;
pub mod loss;
pub mod model;
pub mod optimizer;
pub mod scheduler;
pub mod train;
pub mod train_step;
pub mod tracking;
pub mod checkpoint;
pub mod dlpack;

pub use checkpoint::*;
pub use collectives::*;
pub use common::*;
pub use dlpack::*;
pub use loader::*;
pub use loss::*;
pub use model::*;
pub use optimizer::*;
pub use options::*;
pub use processes::*;
pub use scheduler::*;
pub use state::*;
pub use tensor::*;
pub use tracking::*;
pub use train::*;
pub use train_step::*;
pub use version::*;
