//! Rust closures behind C callbacks. A C callback can only say "failed" (non-zero), and the library then
//! fails the call that ran it with ACCEL_ERR_CALLBACK; `Failures` keeps what the Rust code reported (an
//! error or a panic, which must never unwind into C) so that this call's error can say it.
use std::any::Any;
use std::os::raw::c_int;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;

use accel_sys as sys;

use crate::error::{CallbackResult, Result};

#[derive(Default)]
pub(crate) struct Failures {
    first: Mutex<Option<String>>,
}

impl Failures {
    /// Runs a callback body: 0 when it succeeds, else 1 after keeping the first failure's description
    /// (get_item may fail on several prefetch threads at once).
    pub(crate) fn run(&self, body: impl FnOnce() -> CallbackResult<()>) -> c_int {
        let why = match panic::catch_unwind(AssertUnwindSafe(body)) {
            Ok(Ok(())) => return 0,
            Ok(Err(error)) => error.to_string(),
            Err(panic) => format!("the callback panicked: {}", panic_message(&*panic)),
        };
        let mut first = self.first.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if first.is_none() {
            *first = Some(why);
        }
        1
    }

    /// An ACCEL_ERR_CALLBACK error with the kept failure appended; the failure is cleared.
    pub(crate) fn explain<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|error| {
            let kept = self.first.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            match kept {
                Some(why) if error.code() == sys::ACCEL_ERR_CALLBACK => error.caused_by(&why),
                _ => error,
            }
        })
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_string()
    }
}

/// What the library's payload pointer points to: the Rust function and where its failures go.
pub(crate) struct Payload<F> {
    pub(crate) failures: Failures,
    pub(crate) function: F,
}

/// A payload kept alive, behind `Arc`, by every object whose C side may call it (a dataset and its
/// loaders: the C loader keeps the C dataset alive), and asked why a call failed.
pub(crate) trait KeptPayload: Send + Sync {
    fn failures(&self) -> &Failures;
}

impl<F: Send + Sync> KeptPayload for Payload<F> {
    fn failures(&self) -> &Failures {
        &self.failures
    }
}

/// `result`, explained by the kept payload's failure when it has one.
pub(crate) fn explain<T>(payload: &Option<std::sync::Arc<dyn KeptPayload>>, result: Result<T>) -> Result<T> {
    match payload {
        Some(payload) => payload.failures().explain(result),
        None => result,
    }
}

/// The payload's FnMut function: callbacks that hold state run one at a time.
pub(crate) fn lock<F>(function: &Mutex<F>) -> std::sync::MutexGuard<'_, F> {
    function.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
