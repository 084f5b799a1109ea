//! Seeing a run (capi/accel/tracking.h): trackers, printing on the main process, the progress bar.
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::{self, NonNull};

use accel_sys as sys;

use crate::error::{check, Result};
use crate::handle::new_handle;
use crate::options::{options_ptr, Options};
use crate::serial::one_at_a_time;
use crate::state::State;
use crate::strings::{path_to_c, to_c};

impl State {
    /// Starts (or replaces) the trackers writing project_dir/run_name on the main process; `config_json`
    /// goes verbatim to config.json; options: log_with, overwrite.
    pub fn init_trackers(
        &self,
        project_dir: impl AsRef<Path>,
        run_name: &str,
        config_json: Option<&str>,
        options: Option<&Options>,
    ) -> Result<()> {
        let project_dir = path_to_c(project_dir.as_ref())?;
        let run_name = to_c("run name", run_name)?;
        let config = config_json.map(|json| to_c("config", json)).transpose()?;
        let config_ptr = config.as_ref().map_or(ptr::null(), |json| json.as_ptr());
        one_at_a_time(|| {
            check(unsafe {
                sys::accel_state_init_trackers(self.as_ptr(), project_dir.as_ptr(), run_name.as_ptr(), config_ptr, options_ptr(options))
            })
        })
    }

    /// Logs named scalars at `step` (main process only).
    pub fn log(&self, values: &[(&str, f64)], step: i64) -> Result<()> {
        let names = values.iter().map(|(name, _)| to_c("metric name", name)).collect::<Result<Vec<_>>>()?;
        let name_pointers: Vec<*const c_char> = names.iter().map(|name| name.as_ptr()).collect();
        let numbers: Vec<f64> = values.iter().map(|(_, value)| *value).collect();
        one_at_a_time(|| {
            check(unsafe { sys::accel_state_log(self.as_ptr(), name_pointers.as_ptr(), numbers.as_ptr(), numbers.len(), step) })
        })
    }

    /// Closes the trackers' files (Accelerate's end_training without the collective shutdown).
    pub fn finish_trackers(&self) -> Result<()> {
        one_at_a_time(|| check(unsafe { sys::accel_state_finish_trackers(self.as_ptr()) }))
    }

    /// Prints a line on the local main process, above the progress bar.
    pub fn print(&self, text: &str) -> Result<()> {
        let text = to_c("text", text)?;
        one_at_a_time(|| check(unsafe { sys::accel_state_print(self.as_ptr(), text.as_ptr()) }))
    }
}

/// A progress bar on the local main process (draws nothing elsewhere); drawn to the end when dropped.
pub struct Progress {
    ptr: NonNull<sys::accel_progress_t>,
}

// SAFETY: tracking.h: one thread at a time per state (Progress is not Sync).
unsafe impl Send for Progress {}

impl Progress {
    /// A bar of `total` steps (<= 0: unknown).
    pub fn new(state: &State, total: i64, description: Option<&str>) -> Result<Progress> {
        let description = description.map(|text| to_c("description", text)).transpose()?;
        let description_ptr = description.as_ref().map_or(ptr::null(), |text| text.as_ptr());
        let ptr = one_at_a_time(|| new_handle(|out| unsafe { sys::accel_progress_new(out, state.as_ptr(), total, description_ptr) }))?;
        Ok(Progress { ptr })
    }

    /// Advances by `steps` and shows `loss` (NaN keeps the previous one).
    pub fn update(&mut self, steps: i64, loss: f64) -> Result<()> {
        check(unsafe { sys::accel_progress_update(self.ptr.as_ptr(), steps, loss) })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        unsafe { sys::accel_progress_free(self.ptr.as_ptr()) }
    }
}
