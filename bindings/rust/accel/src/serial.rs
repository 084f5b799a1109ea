//! One thread at a time for the calls that the headers say must not race.
//!
//! capi/accel/state.h: collectives on states that share a process group must be called by one thread at
//! a time; train.h and tracking.h: one thread at a time per state; a loader's epoch start, a prepared
//! model's forward (buffer broadcast) and an optimizer step communicate too. Every state of a process
//! shares its process group, and models, loaders and optimizers may be moved to other threads (they are
//! Send), so the crate serialises these calls with one process-wide lock: that is what lets `State` be
//! `Sync`. The order of collectives across ranks remains the program's business.
//!
//! The lock is not re-entrant: a callback (a dataset's items, a scheduler's multiplier) that calls a
//! collective or training method of the state would wait for itself.
use std::sync::Mutex;

static PROCESS_GROUP: Mutex<()> = Mutex::new(());

pub(crate) fn one_at_a_time<T>(call: impl FnOnce() -> T) -> T {
    // A panic while the lock was held left nothing half-written: the lock guards no data.
    let _guard = PROCESS_GROUP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    call()
}
