/* accel: the process state (Accelerate's Accelerator / AcceleratorState / PartialState).
 *
 * A state reads how the process was launched (torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; else SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; else
 * OMPI_COMM_WORLD_*; else PMI_RANK, PMI_SIZE; nothing at all means one process), chooses the device
 * (the "device" option, else cuda:<local rank> when CUDA is present and use_cpu is off, else cpu), the
 * distributed type, and, with more than one process, joins the process group: a rendezvous at
 * MASTER_ADDR:MASTER_PORT through the store rank 0 serves (listening on that address only, and serving
 * only processes that present ACCEL_JOB_KEY: docs/network.md), then Gloo on
 * CPU or NCCL on CUDA.
 *
 * Shared state: the first state of a process creates the process group; any further state created in
 * the same process shares it (and its rank, device and timeout), like Accelerate's shared
 * AcceleratorState. A later state whose options ask for a different use_cpu, device, backend,
 * mixed_precision or any other state setting but project_dir and total_limit (the handle's own) is refused
 * with ACCEL_ERR_INVALID_STATE: reset the state (accel_state_reset) to change them. After
 * accel_state_shutdown (or accel_state_reset) the next accel_state_new creates a new group. A process forked
 * from one that has a state (Python's multiprocessing, debug_launcher) does not share it: its first
 * accel_state_new makes its own, from its own environment.
 * Each handle is one Accelerator over that shared state, as two Accelerate Accelerators in one process
 * are: its own fp16 loss scaler and optimizers (accel_optimizer_new on a model this handle prepared), its
 * registered objects (accel_state_register_for_checkpointing), trackers and background save. The
 * accumulation counter (sync_gradients) and the checkpoint numbering are the process state's.
 *
 * Differences from Accelerate, on purpose: a multi-process launch on a host without CUDA becomes
 * "multi-cpu" without needing use_cpu (Accelerate silently ran each process alone); SLURM, Open MPI and
 * PMI variables are read too; ACCEL_* environment variables lose to explicit options.
 *
 * Lifetime: handles may be freed in any order; objects created from a state keep what they need of it
 * alive. accel_state_free never talks to other ranks.
 * Thread safety: the accessors are thread-safe. Collectives on states that share a process group must
 * be called by one thread at a time, in the same order on every rank. */
#ifndef ACCEL_STATE_H
#define ACCEL_STATE_H

#include "accel/common.h"
#include "accel/options.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_state accel_state_t;

/* Distributed types, as returned by accel_state_distributed_type. */
#define ACCEL_DISTRIBUTED_NO 0
#define ACCEL_DISTRIBUTED_MULTI_CPU 1
#define ACCEL_DISTRIBUTED_MULTI_GPU 2

/* Creates (or joins the existing) process state. options may be NULL (defaults and environment).
 * With several processes this is collective: it blocks until every rank has joined or timeout_s passes.
 * On success *out owns a handle to release with accel_state_free.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_ENVIRONMENT (a launch variable is malformed or
 * inconsistent, named in the message; a MASTER_ADDR that does not resolve, at once);
 * ACCEL_ERR_BAD_OPTION_VALUE (an ACCEL_* variable does not parse); ACCEL_ERR_UNSUPPORTED (NCCL or CUDA
 * asked for but not built in); ACCEL_ERR_TIMEOUT (a rank did not join in time: every rank that came
 * fails together, naming the ranks that never did); ACCEL_ERR_INVALID_STATE (conflicts with the
 * existing shared state); ACCEL_ERR_IO. */
ACCEL_API ACCEL_NODISCARD int accel_state_new(accel_state_t **out, const accel_options_t *options);

/* Releases this handle. The process group stays up while other handles (or objects made from them)
 * use it; freeing the last one releases it without communicating. A background save in flight that this
 * handle started (accel_state_save_state_async) is waited for first; its failure, unless a call reported
 * it, goes to stderr. NULL is a no-op. */
ACCEL_API void accel_state_free(accel_state_t *state);

/* Collective teardown: waits for the background save in flight (accel_state_save_state_async), then for
 * every rank, then destroys the process group shared by this state and every other state of the process.
 * Afterwards collectives on them fail with ACCEL_ERR_INVALID_STATE. Calling it again is a no-op.
 * Errors: ACCEL_ERR_NULL_ARGUMENT, ACCEL_ERR_TIMEOUT, ACCEL_ERR_PEER_FAILED; the failure of that
 * background save if no call reported it yet (nothing is shut down then: call it again). */
ACCEL_API ACCEL_NODISCARD int accel_state_shutdown(accel_state_t *state);

/* Accelerate's AcceleratorState._reset_state / PartialState._reset_state, as test suites call them between
 * tests: once this handle's background save in flight is done, the process state behind it (when it is
 * still the process's current one; otherwise nothing happens) is retired, and the next accel_state_new
 * makes a new state with any settings (another device, mixed precision, accumulation, ...). The handles
 * and objects made before stay valid to free, but every call that needs the retired state fails with
 * ACCEL_ERR_INVALID_STATE ("the state was reset"); its timeline is written now. With several processes the
 * next state takes over the retired state's process group when it asks for the same group (backend,
 * transport, timeout); otherwise the old group is closed first with a barrier: every process must make its
 * next state at the same point of the program. Not collective itself.
 * Errors: ACCEL_ERR_NULL_ARGUMENT; ACCEL_ERR_INVALID_ARGUMENT (a dead handle); the failure of that background
 * save if no call reported it yet (nothing is reset then: call it again). */
ACCEL_API ACCEL_NODISCARD int accel_state_reset(accel_state_t *state);

/* Blocks until every process reaches this call (a barrier); a no-op with one process. A process in another
 * collective at this point (accel/collectives.h) fails it and this call on every process at once with
 * ACCEL_ERR_INVALID_STATE, naming each process's call; the group stays usable.
 * Errors: ACCEL_ERR_NULL_ARGUMENT, ACCEL_ERR_TIMEOUT, ACCEL_ERR_PEER_FAILED, ACCEL_ERR_INVALID_STATE. */
ACCEL_API ACCEL_NODISCARD int accel_state_wait_for_everyone(accel_state_t *state);

/* Accelerate's set_seed(seed, device_specific): seeds LibTorch's default CPU generator and, when CUDA
 * is present, every GPU's default generator (what torch.manual_seed seeds), with seed, or with
 * seed + accel_state_process_index when device_specific is 1. After it, the CPU generator draws
 * exactly what Python's torch after torch.manual_seed(seed) draws. Accelerate also seeds Python's random
 * and numpy, which accel has not. Loaders shuffle with their own generator (data_seed), untouched, except
 * that a loader made afterwards with use_seedable_sampler and no data_seed starts from seed, as
 * Accelerate's SeedableRandomSampler takes torch.initial_seed().
 * Local to this process, not collective.
 * Returns ACCEL_OK, ACCEL_ERR_NULL_ARGUMENT, ACCEL_ERR_INVALID_ARGUMENT (not a live state; device_specific
 * not 0 or 1). */
ACCEL_API ACCEL_NODISCARD int accel_state_set_seed(accel_state_t *state, uint64_t seed, int device_specific);

/* Accessors: never fail, thread-safe; a NULL state gives 0 (or "" for strings). */
ACCEL_API int32_t accel_state_num_processes(const accel_state_t *state);
ACCEL_API int32_t accel_state_process_index(const accel_state_t *state);
ACCEL_API int32_t accel_state_local_process_index(const accel_state_t *state);
ACCEL_API int32_t accel_state_num_local_processes(const accel_state_t *state);
ACCEL_API int accel_state_is_main_process(const accel_state_t *state);
ACCEL_API int accel_state_is_local_main_process(const accel_state_t *state);
ACCEL_API int accel_state_is_last_process(const accel_state_t *state);
/* One of ACCEL_DISTRIBUTED_*. */
ACCEL_API int accel_state_distributed_type(const accel_state_t *state);
/* "NO", "MULTI_CPU" or "MULTI_GPU"; static storage. */
ACCEL_API const char *accel_state_distributed_type_name(const accel_state_t *state);
/* Device string, "cpu" or "cuda:<n>"; owned by the state, valid while the handle lives. */
ACCEL_API const char *accel_state_device(const accel_state_t *state);
/* "no", "fp16" or "bf16"; owned by the state. */
ACCEL_API const char *accel_state_mixed_precision(const accel_state_t *state);
/* "gloo", "nccl" or "" with one process; "gloo+shm" when all-reduces go through shared memory,
 * "gloo+hier-shm" when through each node's and then between the nodes' leaders (state setting
 * intra_node_transport); owned by the state. */
ACCEL_API const char *accel_state_backend(const accel_state_t *state);
/* Whether a collective that timed out or lost a peer has left the process group broken (1) or not (0).
 * A state that was shut down cleanly is not broken: its collectives fail with ACCEL_ERR_INVALID_STATE
 * saying it was shut down. */
ACCEL_API int accel_state_is_broken(const accel_state_t *state);

#ifdef __cplusplus
}
#endif
#endif
