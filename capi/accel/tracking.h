/* accel: seeing a run (Accelerate's init_trackers, log, end_training and print, and tqdm's bar).
 *
 * Trackers write the scalars a run logs into the run directory project_dir/run_name, on the main process
 * only: metrics.jsonl ({"step":..,"wall_time":..,"<name>":<value>,..} per call), metrics.csv (step,
 * wall_time, name, value: a row per scalar) and a TensorBoard event file (events.out.tfevents.*), as the
 * trackers option log_with chooses (default "jsonl,csv,tensorboard"). Each record goes to the file with
 * one write as it is logged, so a killed run loses at most the record being written. A run started again
 * in the same directory resumes: steps up to the last one an earlier run logged are skipped, not written
 * twice. `accel plot RUN_DIR` draws the logged scalars.
 *
 * Thread safety: one thread at a time per state, like the training step. */
#ifndef ACCEL_TRACKING_H
#define ACCEL_TRACKING_H

#include "accel/common.h"
#include "accel/options.h"
#include "accel/state.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_progress accel_progress_t;

/* Starts (or, called again, replaces) the state's trackers. config_json (may be NULL) is written verbatim
 * to config.json in the run directory. options: log_with; overwrite (false: a run directory that holds
 * metrics is resumed; true: its metrics files are removed first). Not collective; other ranks only check
 * their arguments.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (empty project_dir, a run_name that is not a
 * single directory name); ACCEL_ERR_BAD_OPTION_VALUE (log_with names an unknown tracker);
 * ACCEL_ERR_UNKNOWN_OPTION; ACCEL_ERR_IO (the directory or a file cannot be created). */
ACCEL_API ACCEL_NODISCARD int accel_state_init_trackers(accel_state_t *state, const char *project_dir,
                                                        const char *run_name, const char *config_json,
                                                        const accel_options_t *options);
/* Logs count named scalars at step (Accelerate's log(values, step=step)); a step <= the last one of a
 * resumed run is skipped. NaN and infinities are written as null (JSONL), nan/inf (CSV), as is (TensorBoard).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (negative step, an empty or repeated name);
 * ACCEL_ERR_INVALID_STATE (no trackers: call accel_state_init_trackers first); ACCEL_ERR_IO. */
ACCEL_API ACCEL_NODISCARD int accel_state_log(accel_state_t *state, const char *const *names, const double *values,
                                              size_t count, int64_t step);
/* Closes the trackers' files (Accelerate's end_training, without the collective shutdown, which is
 * accel_state_shutdown). Calling it without trackers is a no-op. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_state_finish_trackers(accel_state_t *state);

/* Prints text and a line break on stdout, on the local main process only (once per machine, as
 * Accelerate's print does), above the progress bar when one is drawn. Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_state_print(const accel_state_t *state, const char *text);

/* A progress bar of total steps (<= 0: unknown) on stdout of the local main process (one bar per machine,
 * as Accelerate's scripts show tqdm); on other ranks a handle that draws nothing. On a terminal it is redrawn in place (at most 10 times a second); otherwise a plain
 * line is printed per tenth of the total or every 30 s. description may be NULL.
 * Errors: ACCEL_ERR_NULL_ARGUMENT. */
ACCEL_API ACCEL_NODISCARD int accel_progress_new(accel_progress_t **out, const accel_state_t *state, int64_t total,
                                                 const char *description);
/* Advances the bar by steps and shows loss as the last loss (NaN: keep the previous one).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (negative steps, or steps that would take
 * the count past INT64_MAX). */
ACCEL_API ACCEL_NODISCARD int accel_progress_update(accel_progress_t *progress, int64_t steps, double loss);
/* Draws the final line and releases the bar; NULL is a no-op. */
ACCEL_API void accel_progress_free(accel_progress_t *progress);

#ifdef __cplusplus
}
#endif
#endif
