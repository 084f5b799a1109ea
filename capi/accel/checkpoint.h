/* accel: Accelerate's save_state / load_state: a directory from which a run continues exactly where it
 * stopped (same parameters, optimizer moments, schedule, loss scale, batch order and random numbers).
 *
 * What a checkpoint holds: each model's parameters and buffers (model.safetensors, model_1.safetensors,
 * ..., tied weights once, as accel_state_save_model stores them; accel_model_load_weights reads the first
 * model), each optimizer's, scheduler's and the fp16 grad scaler's state (states.safetensors), written by
 * the main process; each rank's loader positions and random generators (rank<r>/states.safetensors); and
 * metadata.json (accel and LibTorch versions, world size, the accumulation counter as "step", the first
 * loader's epoch, how many objects of each kind).
 *
 * The objects are passed as arrays rather than collected into a handle first: a checkpoint is made of
 * objects the caller already holds, so arrays add no lifetime rules and no functions to register them.
 * Their order is part of the checkpoint: load with the same arrays, in the same order. Any count may be
 * 0 (its array may then be NULL).
 *
 * Numbered checkpoints (Accelerate's ProjectConfiguration with automatic_checkpoint_naming): with a NULL
 * directory, save_state writes project_dir/checkpoints/checkpoint_<i> (the state keys project_dir and
 * total_limit, accel/options.h), i counting the state's saves from 0, and load_state loads the
 * highest-numbered one. Loading any folder named checkpoint_<n> sets i to n + 1, so a resumed run goes on
 * numbering after the checkpoint it started from.
 *
 * Thread safety: one thread at a time per state, and none of the objects in use by another thread. */
#ifndef ACCEL_CHECKPOINT_H
#define ACCEL_CHECKPOINT_H

#include "accel/common.h"
#include "accel/loader.h"
#include "accel/model.h"
#include "accel/optimizer.h"
#include "accel/scheduler.h"
#include "accel/state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Saves everything listed into directory (created with its parents; an existing checkpoint there is
 * replaced), or with directory NULL into the next numbered checkpoint of project_dir, after removing the
 * oldest ones so that at most total_limit remain (when total_limit > 0). Collective: every rank calls it with the same directory. The files go to
 * "<directory>.saving" first; once every rank has written its part, the main process moves the folder
 * into place in one atomic step, so a run killed while saving leaves the previous checkpoint intact.
 * Models must be prepared. Errors: ACCEL_ERR_NULL_ARGUMENT (state, an array with a non-zero count, or an
 * element); ACCEL_ERR_INVALID_ARGUMENT (a dead handle; directory NULL without project_dir; a negative
 * total_limit); ACCEL_ERR_IO naming the path (also when the numbered checkpoint to write exists);
 * collective errors. */
ACCEL_API ACCEL_NODISCARD int accel_state_save_state(accel_state_t *state, const char *directory,
                                                     accel_model_t *const *models, size_t num_models,
                                                     accel_optimizer_t *const *optimizers, size_t num_optimizers,
                                                     accel_scheduler_t *const *schedulers, size_t num_schedulers,
                                                     accel_loader_t *const *loaders, size_t num_loaders);

/* Restores what accel_state_save_state saved with the same arrays, from directory, or with directory
 * NULL from the highest-numbered checkpoint of project_dir (ACCEL_ERR_IO when there is none). Every file
 * this rank needs is read and checked first (the world size and object counts in metadata.json, each
 * model tensor's name, shape and dtype, each saved state's format); on any error nothing has changed.
 * Then models, optimizers, schedulers, the grad scaler, loaders (their next batch is the one after the
 * last saved one; call it before starting an epoch), this rank's random generators and the accumulation
 * counter are restored, and the numbering of the next checkpoint follows the one loaded.
 * Collective: the ranks share their checks' outcome, and none restores anything unless every one can.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_IO (a missing file, naming it); ACCEL_ERR_INVALID_ARGUMENT
 * naming the file and the mismatch (another world size, a shape or dtype, a truncated or damaged file, a
 * dead handle); ACCEL_ERR_PEER_FAILED naming the rank that could not load, on the others;
 * ACCEL_ERR_INVALID_STATE (a loader in the middle of an epoch); collective errors. */
ACCEL_API ACCEL_NODISCARD int accel_state_load_state(accel_state_t *state, const char *directory,
                                                     accel_model_t *const *models, size_t num_models,
                                                     accel_optimizer_t *const *optimizers, size_t num_optimizers,
                                                     accel_scheduler_t *const *schedulers, size_t num_schedulers,
                                                     accel_loader_t *const *loaders, size_t num_loaders);

#ifdef __cplusplus
}
#endif
#endif
