/* accel: Accelerate's save_state / load_state: a directory from which a run continues exactly where it
 * stopped (same parameters, optimizer moments, schedule, loss scale, batch order and random numbers).
 *
 * What a checkpoint holds: each model's parameters and buffers (model.safetensors, model_1.safetensors,
 * ..., tied weights once, as accel_state_save_model stores them; accel_model_load_weights reads the first
 * model; or, for a model saved in pieces, the prepare option checkpoint_model and
 * accel_model_set_checkpoint_model, each rank's piece of every tensor under the same name in its rank<r>/
 * folder, which load_state reads on any number of processes and `accel checkpoint merge` joins), each
 * optimizer's, scheduler's and the fp16 grad scaler's state (states.safetensors), written by
 * the main process; each rank's loader positions and random generators (rank<r>/states.safetensors); and
 * metadata.json (accel and LibTorch versions, world size, the accumulation counter as "step", the first
 * loader's epoch, how many objects of each kind, the names of the registered objects, and, when the
 * trackers are on, their run name and last logged step as "tracker_run" and "tracker_last_step"); and
 * each rank's bytes of every object registered with accel_state_register_for_checkpointing
 * (rank<r>/custom_checkpoint_<name>.bin).
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
 * Background saving (accel_state_save_state_async, accel_state_wait_for_save): the snapshot is taken during
 * the call, the files are written by a thread of accel's while training goes on.
 *
 * Thread safety: one thread at a time per state, and none of the objects in use by another thread; the
 * callbacks of registered objects run on the thread that calls save_state / save_state_async /
 * load_state. */
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

/* Accelerate's register_for_checkpointing: objects of the caller's own (a counter, a sampler, a Python
 * object) that every save_state and load_state of this state saves and restores, as bytes the caller
 * produces and consumes.
 *
 * A byte sink: where a save callback hands its bytes over. Owned by accel; valid only during the callback
 * it is passed to (afterwards it is not a live handle). */
typedef struct accel_sink accel_sink_t;

/* Appends size bytes from data (NULL allowed when size is 0) to the sink; call it as often as needed. The
 * bytes are copied before it returns. Errors: ACCEL_ERR_NULL_ARGUMENT (sink; data with size > 0);
 * ACCEL_ERR_INVALID_ARGUMENT (not a live sink: used after its callback returned).
 * Thread safety: the thread running the callback. */
ACCEL_API ACCEL_NODISCARD int accel_sink_write(accel_sink_t *sink, const void *data, size_t size);

/* Writes the object's state into sink with accel_sink_write (nothing written: an empty state); 0 for
 * success, anything else fails the save with ACCEL_ERR_CALLBACK naming the object. */
typedef int (*accel_save_object_fn)(accel_sink_t *sink, void *payload);
/* Restores the object from the size bytes at data, exactly what its save callback wrote on this rank.
 * data is owned by accel and valid only during the call. 0 for success, anything else fails the load
 * with ACCEL_ERR_CALLBACK naming the object. */
typedef int (*accel_load_object_fn)(const void *data, size_t size, void *payload);

/* Registers an object under name: from now on accel_state_save_state calls save on every rank, before
 * writing anything, and writes the bytes into that rank's folder of the checkpoint
 * (rank<r>/custom_checkpoint_<name>.bin, inside the same atomic move as the rest), listing name in
 * metadata.json; accel_state_load_state checks that the checkpoint's names are exactly the registered
 * ones and reads every object's file before calling any load callback, then calls load for each object
 * in registration order, before restoring models, optimizers, schedulers, loaders and generators (so a
 * failing load leaves those untouched; objects loaded before it stay loaded). Every rank registers the
 * same names in the same order. A save or load callback failing on one rank fails the call on every rank
 * (ACCEL_ERR_PEER_FAILED on the others). The registration lasts until accel_state_free_memory (which
 * forgets every registered object: register again what the next checkpoints hold) or until the state
 * handle is freed. payload is passed back untouched and must stay valid until then.
 * name: letters, digits, '_', '-', '.', not starting with '.'; copied.
 * Errors: ACCEL_ERR_NULL_ARGUMENT (state, name, save, load); ACCEL_ERR_INVALID_ARGUMENT (a dead state; a
 * name not usable in a file name; a name already registered on this state, naming it).
 * Thread safety: one thread at a time per state. */
ACCEL_API ACCEL_NODISCARD int accel_state_register_for_checkpointing(accel_state_t *state, const char *name,
                                                                     accel_save_object_fn save,
                                                                     accel_load_object_fn load, void *payload);

/* The bytes every process that saved an object registered with accel_state_register_parts_for_checkpointing
 * wrote, one part per saving process. Owned by accel; valid only during the load callback it is passed to
 * (afterwards it is not a live handle). */
typedef struct accel_parts accel_parts_t;

/* How many processes saved the object (its parts are 0 .. count - 1, by saving rank); 0 for a NULL or dead
 * handle. Thread safety: the thread running the callback. */
ACCEL_API int64_t accel_parts_count(const accel_parts_t *parts);

/* Reads the bytes process `part` saved: *data and *size then describe them, owned by accel and valid until
 * the next accel_parts_read on this handle or the callback's return, whichever comes first (only one part is
 * held at a time, so a process loading its share of a large state holds one saved part at a time).
 * Errors: ACCEL_ERR_NULL_ARGUMENT (parts, data, size); ACCEL_ERR_INVALID_ARGUMENT (not a live handle);
 * ACCEL_ERR_OUT_OF_RANGE (part not in [0, count)); ACCEL_ERR_IO naming the file.
 * Thread safety: the thread running the callback. */
ACCEL_API ACCEL_NODISCARD int accel_parts_read(accel_parts_t *parts, int64_t part, const void **data, size_t *size);

/* Drops the part last read (the pointer accel_parts_read gave becomes invalid), so that a caller that has
 * copied or parsed it does not hold it twice while loading. Nothing read: nothing to drop.
 * Errors: ACCEL_ERR_NULL_ARGUMENT (parts); ACCEL_ERR_INVALID_ARGUMENT (not a live handle).
 * Thread safety: the thread running the callback. */
ACCEL_API ACCEL_NODISCARD int accel_parts_release(accel_parts_t *parts);

/* Restores the object from the parts it reads from `parts` (any of them, in any order, as often as it
 * needs). 0 for success, anything else fails the load with ACCEL_ERR_CALLBACK naming the object. */
typedef int (*accel_load_parts_fn)(accel_parts_t *parts, void *payload);

/* accel_state_register_for_checkpointing for an object any number of processes can load: a state every
 * process holds alike (a scheduler's), or one each process holds a share of (a ZeRO optimizer's). Saved as
 * a per-process object is (save on every rank, rank<r>/custom_checkpoint_<name>.bin); at
 * accel_state_load_state every saving process's file must exist (ACCEL_ERR_IO naming a missing one, before
 * any callback runs), and load gets every saving process's bytes through `parts` instead of its own rank's
 * only. So a checkpoint whose registered objects are all of this kind resumes on another number of
 * processes (one holding a per-process object does not: ACCEL_ERR_INVALID_ARGUMENT naming it). The same
 * rules otherwise: names, order, failures on one rank failing every rank, lifetime, payload.
 * Errors: ACCEL_ERR_NULL_ARGUMENT (state, name, save, load); ACCEL_ERR_INVALID_ARGUMENT (a dead state; a
 * name not usable in a file name; a name already registered on this state, naming it).
 * Thread safety: one thread at a time per state. */
ACCEL_API ACCEL_NODISCARD int accel_state_register_parts_for_checkpointing(accel_state_t *state, const char *name,
                                                                           accel_save_object_fn save,
                                                                           accel_load_parts_fn load, void *payload);

/* Saves everything listed into directory (created with its parents; an existing checkpoint there is
 * replaced), or with directory NULL into the next numbered checkpoint of project_dir, removing the oldest
 * ones so that at most total_limit remain (when total_limit > 0): once every rank has written its part,
 * just before the new one moves into place, so a save that fails to write removes nothing and no rank, while
 * the call runs or after it returns, ever sees more than total_limit. Collective: every rank calls it with
 * the same directory.
 * Called on some ranks only (upstream's `if accelerator.is_main_process: save_state(...)`), it does not
 * wait out the timeout: it fails on every rank with ACCEL_ERR_INVALID_STATE, "collectives out of step",
 * naming each rank and what it is in. Against a collective of accel/collectives.h or a barrier on the other
 * ranks that happens at once and the state stays usable (the calls' descriptions were all that was sent);
 * against a gradient all-reduce (their next backward), within a few seconds, and the state is broken as
 * after a timeout.
 * The files go to "<directory>.saving" first; once every rank has written its part, the main process
 * moves the folder into place in one atomic step, so a run killed while saving leaves the previous checkpoint intact.
 * Models must be prepared. Errors: ACCEL_ERR_NULL_ARGUMENT (state, an array with a non-zero count, or an
 * element); ACCEL_ERR_INVALID_ARGUMENT (a dead handle; directory NULL without project_dir; a negative
 * total_limit); ACCEL_ERR_IO naming the path (also when the numbered checkpoint to write exists);
 * ACCEL_ERR_CALLBACK naming the registered object whose save callback failed (nothing is written then);
 * ACCEL_ERR_INVALID_STATE (not called on every rank, see above); collective errors. A background save in flight
 * (accel_state_save_state_async) is waited for first, and its failure, if no call reported it yet, is
 * returned instead of saving. Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_state_save_state(accel_state_t *state, const char *directory,
                                                     accel_model_t *const *models, size_t num_models,
                                                     accel_optimizer_t *const *optimizers, size_t num_optimizers,
                                                     accel_scheduler_t *const *schedulers, size_t num_schedulers,
                                                     accel_loader_t *const *loaders, size_t num_loaders);

/* accel_state_save_state in the background: takes the snapshot now and returns, while a thread writes it
 * and moves it into place, so that training goes on during the writing. Same arguments, same files, same
 * collective rule: every rank calls it with the same directory (NULL: the next numbered checkpoint of
 * project_dir, numbered now; a save that fails in the background leaves its number unused).
 *
 * First it waits for the previous background save of this process state, if one is in flight (one
 * snapshot at most in memory), reporting its failure instead of saving if no call reported it yet. The
 * snapshot, taken before it returns: every model's parameters and buffers copied to host memory, the
 * optimizer, scheduler and grad-scaler states and every loader's position serialised, each rank's random
 * generators, the registered objects' bytes (their save callbacks run on this thread, during this call)
 * and the counters. Afterwards the objects may change and be freed; the checkpoint holds them as they were
 * at this call, bit for bit as accel_state_save_state would have saved them. Extra host memory: about one
 * checkpoint's size (the models' tensors, the optimizer state, the rest), until the files are written.
 *
 * Completion: each rank's thread writes its part of "<directory>.saving" and tells the others through the
 * rendezvous store (a connection of its own: no collective of the process group runs off this thread);
 * once every rank's part is written, the main process removes the numbered checkpoints beyond
 * total_limit - 1, then moves the folder into place. When any rank's writing fails, nothing is moved (the previous
 * checkpoint stays intact), the staging folder is removed, and every rank records the same failure,
 * naming the rank and the path.
 *
 * A failure in the background is reported once, by the first of these calls on this handle (or on an
 * optimizer or train step made from a model it prepared) after it is known, which then returns its code (ACCEL_ERR_IO for a file, ACCEL_ERR_TIMEOUT or
 * ACCEL_ERR_PEER_FAILED when a rank did not say it was done) with a message starting "the background save
 * to '<directory>' failed" and does nothing else (call it again to do its work):
 * accel_state_save_state_async, accel_state_save_state, accel_state_load_state and
 * accel_state_wait_for_save (which wait for the save in flight first, so every rank reports it at the same
 * call), accel_state_shutdown (also waits first), and without waiting accel_state_backward,
 * accel_state_backward_with_items, accel_optimizer_step and accel_train_step_run (on each rank as soon as
 * that rank knows, which may be a step apart between ranks). accel_state_free of the handle, and a process
 * that exits with the save in flight, wait for it; a failure no call reported then goes to stderr.
 *
 * Errors (of the call itself, before it returns): as accel_state_save_state, with nothing written; a
 * failure of the previous background save, as above. Thread safety: one thread at a time per state; the
 * background thread touches none of the caller's objects.
 * Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_state_save_state_async(accel_state_t *state, const char *directory,
                                                           accel_model_t *const *models, size_t num_models,
                                                           accel_optimizer_t *const *optimizers, size_t num_optimizers,
                                                           accel_scheduler_t *const *schedulers, size_t num_schedulers,
                                                           accel_loader_t *const *loaders, size_t num_loaders);

/* Waits until the background save in flight (accel_state_save_state_async) is in place or has failed, and
 * returns its failure if no call reported it yet (once: a second call returns ACCEL_OK). Returns at once
 * when there is none. Not a collective itself, but every rank's wait ends only once every rank has written
 * its part (or failed to), up to the timeout_s setting. Errors: ACCEL_ERR_NULL_ARGUMENT;
 * ACCEL_ERR_INVALID_ARGUMENT (a dead handle); a background failure, as described at
 * accel_state_save_state_async. Thread safety: one thread at a time per state. */
ACCEL_API ACCEL_NODISCARD int accel_state_wait_for_save(accel_state_t *state);

/* Restores what accel_state_save_state saved with the same arrays, from directory, or with directory
 * NULL from the highest-numbered checkpoint of project_dir (ACCEL_ERR_IO when there is none). Every file
 * this rank needs is read and checked first (the world size and object counts in metadata.json, each
 * model tensor's name, shape and dtype, each saved state's format); on any error nothing has changed.
 * Then models, optimizers, schedulers, the grad scaler, loaders (their next batch is the one after the
 * last saved one; call it before starting an epoch), this rank's random generators and the accumulation
 * counter are restored, and the numbering of the next checkpoint follows the one loaded.
 * Collective: the ranks share their checks' outcome, and none restores anything unless every one can;
 * called on some ranks only, it fails on every rank within seconds, as accel_state_save_state does.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_IO (a missing file, naming it); ACCEL_ERR_INVALID_ARGUMENT
 * naming the file and the mismatch (another world size, a shape or dtype, a truncated or damaged file, a
 * dead handle); ACCEL_ERR_PEER_FAILED naming the rank that could not load, on the others;
 * ACCEL_ERR_INVALID_STATE (a loader in the middle of an epoch); ACCEL_ERR_INVALID_ARGUMENT naming a
 * registered object the checkpoint lacks, or an object in the checkpoint that is not registered (both
 * before any load callback runs); ACCEL_ERR_CALLBACK naming the registered object whose load callback
 * failed; collective errors. A background save in flight is waited for first (it may be the checkpoint to
 * load), and its failure, if no call reported it yet, is returned instead of loading. */
ACCEL_API ACCEL_NODISCARD int accel_state_load_state(accel_state_t *state, const char *directory,
                                                     accel_model_t *const *models, size_t num_models,
                                                     accel_optimizer_t *const *optimizers, size_t num_optimizers,
                                                     accel_scheduler_t *const *schedulers, size_t num_schedulers,
                                                     accel_loader_t *const *loaders, size_t num_loaders);

/* The number of the next numbered checkpoint (Accelerate's ProjectConfiguration.iteration): 0 at first, one
 * more after each numbered save, the loaded checkpoint's number + 1 after a load from a numbered folder.
 * Each state handle has its own, as it has its own project_dir and total_limit. accel_state_checkpoint_iteration
 * gives 0 for a NULL or dead state. Set it to resume the numbering in a fresh process, or to overwrite on purpose
 * (a numbered folder that exists is never overwritten: the save fails instead).
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (a dead state, a negative iteration).
 * Thread safety: one thread at a time per state, as save_state. */
ACCEL_API int64_t accel_state_checkpoint_iteration(const accel_state_t *state);
ACCEL_API ACCEL_NODISCARD int accel_state_set_checkpoint_iteration(accel_state_t *state, int64_t iteration);

#ifdef __cplusplus
}
#endif
#endif
