//! What the integration tests share: the tiny TorchScript model (written by Python's torch on first use),
//! the launcher, and one test at a time on the process state.
#![allow(dead_code)] // each test binary uses its own part of this module

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, Once};

/// The process state, its active loader and its trackers are shared by every test of a binary, which
/// libtest runs on parallel threads: tests that make a state hold this.
pub fn one_test_at_a_time() -> MutexGuard<'static, ()> {
    static STATE_TESTS: Mutex<()> = Mutex::new(());
    STATE_TESTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// tests/support/tiny_models.py's model, written once per test binary by ACCEL_PYTHON (/usr/bin/python3).
pub fn tiny_model() -> PathBuf {
    static WRITTEN: Once = Once::new();
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tiny.pt");
    WRITTEN.call_once(|| {
        let python = std::env::var("ACCEL_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".to_string());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/tiny_models.py");
        let status =
            Command::new(&python).arg(&script).arg(&path).status().unwrap_or_else(|error| panic!("cannot run {}: {}", python, error));
        assert!(status.success(), "{} {} failed ({}): it needs torch", python, script.display(), status);
    });
    path
}

/// `accel launch`: ACCEL_LAUNCHER, else the CMake build tree's build/bin/accel.
pub fn launcher() -> PathBuf {
    match std::env::var_os("ACCEL_LAUNCHER") {
        Some(path) => PathBuf::from(path),
        None => {
            let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../build/bin/accel");
            assert!(built.exists(), "set ACCEL_LAUNCHER to the `accel` program (build/bin/accel)");
            built
        }
    }
}
