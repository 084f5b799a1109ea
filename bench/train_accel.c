/* The accel side of the training benchmark (bench/run_train.sh runs it, interleaved with
 * bench/train_libtorch.cpp and bench/train_torch_ddp.py, and compares). Uses only the public C API.
 *
 *   train_accel MODEL [steps] [warmup] [profile] [serve] [graph] [grad_compression=no|bf16|fp16]
 *               [checkpoint_every=N checkpoint=blocking|background checkpoint_dir=DIR]
 *               [optimizer=sgd|adamw] [zero_stage=0|1|2|3] [zero_cpu_offload]
 *
 * Run directly for one process, through `accel launch --nproc-per-node 2 --cpu` for two; bench/run_gpu.sh
 * runs it on one GPU as well. The device and the mixed precision are the state's (its own choice, or
 * ACCEL_USE_CPU, ACCEL_MIXED_PRECISION, ...); the batches are sent there before the first step.
 * The model is examples/make_mlp.py's MLP 784-1024-1024-10; each process trains it with SGD (lr 0.01, no
 * momentum) and cross-entropy on a batch of 64 per step, cycling through BATCHES fixed synthetic
 * batches made once before the loop (xorshift64*, seeded by the rank; bench/train_libtorch.cpp and
 * bench/train_torch_ddp.py make exactly the same numbers). A step is what an Accelerate loop does:
 *   accel_state_accumulate, accel_model_forward, accel_loss_compute("cross_entropy"), accel_state_backward,
 *   accel_optimizer_step, accel_optimizer_zero_grad (and freeing this step's handles).
 * With `graph` a step is one accel_train_step_run of a train step made with cuda_graph on (accel/train_step.h):
 * on a GPU, captured as one CUDA graph after its own warm-up and replayed; the line then adds the step's
 * replays and captures, and its eager_reason when the last step did not replay.
 * `warmup` steps run first; then, after accel_state_wait_for_everyone (so that every rank times the same
 * steps), `steps` steps are timed with CLOCK_MONOTONIC. The loss of the last warm-up step is read before
 * the clock starts and the loss of the last timed step before it stops: on a GPU the calls only queue
 * kernels, and the C API's way to wait for them is to read a result. Rank 0 prints one line of key=value
 * pairs: step_ms (wall time / steps), samples_per_s (processes * 64 / step time), the loss of the first
 * warm-up step and of the last timed step (the same model and data give the same numbers on every side),
 * and what shows that one thread per process took effect: OMP_NUM_THREADS, the threads of the process
 * (/proc/self/task) and CPU time over wall time during the timed steps, the device and the mixed precision,
 * then rank 0's gradient all-reduce figures per timed step (accel_model_grad_sync_stat, 0 on one process):
 * sync_reduce_ms (an all-reduce in flight), sync_overlapped_ms (of it, while backward still computed),
 * sync_exposed_ms (after), sync_wait_ms (backward's measured wait), sync_helper_cpu_ms (the shared-memory
 * thread's CPU time) and sync_bytes, then rank 0's memory figures: gradient_bytes (held after the last
 * synchronising backward) and optimizer_state_bytes. grad_compression=... and zero_stage=... are passed to
 * accel_state_prepare_model; optimizer=adamw trains with AdamW (lr 0.01, weight_decay 0.01) instead of SGD.
 * With `profile` every call of the step is timed on its own (clock_gettime around each) and the line adds
 * the mean milliseconds per step of each. With `serve` (one process) the warm-up is followed by a line
 * "ready", then every line read from standard input starts a round of `warmup` more steps and `steps` timed
 * ones, which prints its line, until the input ends: bench/run_gpu.sh keeps every side's process up and
 * interleaves their rounds, so that no round waits for a process to start. With checkpoint_every=N, every
 * N-th timed step but the last is followed by a checkpoint of the model and optimizer into DIR (replaced
 * each time), with accel_state_save_state (blocking) or accel_state_save_state_async (background; the last
 * one is waited for with accel_state_wait_for_save before the clock stops), so that step_ms includes what
 * the checkpoints cost the training: bench/run_train.sh compares both with no checkpoint. */
#define _POSIX_C_SOURCE 199309L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "accel.h"
#include "bench_clock.h"

#define BATCH 64
#define FEATURES 784
#define CLASSES 10
#define BATCHES 4
#define LR 0.01

static int g_rank = 0;

static void check(int code, const char *what) {
  if (code != ACCEL_OK) {
    fprintf(stderr, "train_accel (rank %d): %s failed: %s (%s)\n", g_rank, what, accel_error_last(),
            accel_error_name(code));
    exit(1);
  }
}

static double cpu_s(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec * 1e-6 + (double)usage.ru_stime.tv_sec +
         (double)usage.ru_stime.tv_usec * 1e-6;
}

static int thread_count(void) {
  int count = 0;
  struct dirent *entry;
  DIR *dir = opendir("/proc/self/task");
  if (dir == NULL) return -1;
  while ((entry = readdir(dir)) != NULL) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

/* xorshift64*, seeded by the rank: the same sequence as in train_libtorch.cpp and train_torch_ddp.py. */
static uint64_t rng_state;
static uint64_t rng_next(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Replaces *tensor by its copy on the state's device (the same tensor when it is there already). */
static void to_device(const accel_state_t *state, accel_tensor_t **tensor) {
  accel_tensor_t *moved = NULL;
  check(accel_state_send_to_device(state, *tensor, 0, &moved), "accel_state_send_to_device");
  accel_tensor_free(*tensor);
  *tensor = moved;
}

/* Batch b: 64 x 784 floats in [0, 1) (exact in float32), then 64 labels 0..9, on the state's device. */
static void make_batches(const accel_state_t *state, int rank, accel_tensor_t **x, accel_tensor_t **y) {
  static float features[BATCH * FEATURES];
  static int64_t labels[BATCH];
  const int64_t x_shape[2] = {BATCH, FEATURES}, y_shape[1] = {BATCH};
  int b, i;
  rng_state = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(rank + 1) * 0xD1B54A32D192ED03ull);
  for (b = 0; b < BATCHES; ++b) {
    for (i = 0; i < BATCH * FEATURES; ++i) features[i] = (float)(rng_next() >> 40) * (1.0f / 16777216.0f);
    for (i = 0; i < BATCH; ++i) labels[i] = (int64_t)(rng_next() % CLASSES);
    check(accel_tensor_from_buffer(&x[b], features, ACCEL_DTYPE_FLOAT32, x_shape, 2), "accel_tensor_from_buffer(x)");
    check(accel_tensor_from_buffer(&y[b], labels, ACCEL_DTYPE_INT64, y_shape, 1), "accel_tensor_from_buffer(y)");
    to_device(state, &x[b]);
    to_device(state, &y[b]);
  }
}

enum { P_ACCUMULATE, P_FORWARD, P_LOSS, P_BACKWARD, P_STEP, P_ZERO_GRAD, P_FREE, P_COUNT };
static const char *const phase_names[P_COUNT] = {"accumulate", "forward", "loss",   "backward",
                                                 "opt_step",   "zero_grad", "free"};
static double phase_s[P_COUNT];

/* One training step; the loss handle is returned (the caller frees it). With profile, each call is timed. */
static accel_tensor_t *train_step(accel_state_t *state, accel_model_t *model, accel_optimizer_t *optimizer,
                                  accel_tensor_t *x, accel_tensor_t *y, int profile) {
  accel_output_t *output = NULL;
  accel_tensor_t *logits = NULL, *loss = NULL;
  double t0 = profile ? now_s() : 0.0, t1;
#define PHASE(p)                   \
  if (profile) {                   \
    t1 = now_s();                  \
    phase_s[p] += t1 - t0;         \
    t0 = t1;                       \
  }
  check(accel_state_accumulate(state), "accel_state_accumulate");
  PHASE(P_ACCUMULATE);
  check(accel_model_forward(model, &x, 1, NULL, NULL, 0, &output), "accel_model_forward");
  check(accel_output_get(output, 0, &logits), "accel_output_get");
  PHASE(P_FORWARD);
  check(accel_loss_compute(&loss, "cross_entropy", logits, y, NULL), "accel_loss_compute");
  PHASE(P_LOSS);
  check(accel_state_backward(state, loss), "accel_state_backward");
  PHASE(P_BACKWARD);
  check(accel_optimizer_step(optimizer), "accel_optimizer_step");
  PHASE(P_STEP);
  check(accel_optimizer_zero_grad(optimizer), "accel_optimizer_zero_grad");
  PHASE(P_ZERO_GRAD);
  accel_tensor_free(logits);
  accel_output_free(output);
  PHASE(P_FREE);
#undef PHASE
  return loss;
}

#define SYNC_FIGURES 6
static const char *const sync_names[SYNC_FIGURES] = {"reduce_ms", "overlapped_ms", "exposed_ms",
                                                     "wait_ms",   "helper_cpu_ms", "bytes"};

static void read_sync_figures(const accel_model_t *model, double *values) {
  int f;
  for (f = 0; f < SYNC_FIGURES; ++f) {
    check(accel_model_grad_sync_stat(model, sync_names[f], &values[f]), "accel_model_grad_sync_stat");
  }
}

static float loss_value(accel_tensor_t *loss) {
  float value = 0.0f;
  check(accel_tensor_copy_to_buffer(loss, &value, sizeof value), "accel_tensor_copy_to_buffer(loss)");
  return value;
}

/* What a run's steps share. `taken` counts the steps so far: every side cycles through the batches in the
 * same order, round after round. */
struct run {
  accel_state_t *state;
  accel_model_t *model;
  accel_optimizer_t *optimizer;
  accel_train_step_t *graph_step;  /* with `graph` */
  accel_tensor_t *x[BATCHES], *y[BATCHES];
  long taken;
  float first_loss;
  int profile;
  long checkpoint_every;  /* 0: no checkpoints */
  int checkpoint_background;
  const char *checkpoint_dir;
};

static void save_checkpoint(struct run *run) {
  accel_model_t *models[1];
  accel_optimizer_t *optimizers[1];
  models[0] = run->model;
  optimizers[0] = run->optimizer;
  if (run->checkpoint_background) {
    check(accel_state_save_state_async(run->state, run->checkpoint_dir, models, 1, optimizers, 1, NULL, 0, NULL, 0),
          "accel_state_save_state_async");
  } else {
    check(accel_state_save_state(run->state, run->checkpoint_dir, models, 1, optimizers, 1, NULL, 0, NULL, 0),
          "accel_state_save_state");
  }
}

static accel_tensor_t *next_step(struct run *run, int profile) {
  const long b = run->taken++ % BATCHES;
  accel_tensor_t *loss = NULL;
  if (run->graph_step == NULL) return train_step(run->state, run->model, run->optimizer, run->x[b], run->y[b], profile);
  check(accel_train_step_run(run->graph_step, &run->x[b], 1, NULL, NULL, 0, run->y[b], &loss), "accel_train_step_run");
  return loss;
}

static long step_stat(const struct run *run, const char *name) {
  double value = 0.0;
  check(accel_train_step_stat(run->graph_step, name, &value), "accel_train_step_stat");
  return (long)value;
}

/* `count` untimed steps; the last one's loss is read, so that none of their kernels runs on the clock. */
static void warm_up(struct run *run, long count) {
  accel_tensor_t *loss = NULL;
  long i;
  for (i = 0; i < count; ++i) {
    accel_tensor_free(loss);
    loss = next_step(run, 0);
    if (run->taken == 1) run->first_loss = loss_value(loss);
  }
  loss_value(loss);
  accel_tensor_free(loss);
}

/* `steps` timed steps, after a barrier so that every rank times the same steps; rank 0 prints the line. */
static void timed_round(struct run *run, long steps, long warmup) {
  const char *omp = getenv("OMP_NUM_THREADS");
  const int processes = accel_state_num_processes(run->state);
  accel_tensor_t *loss = NULL;
  double start, elapsed, cpu_start, cpu_elapsed;
  long faults_start, faults, i;
  float last_loss;
  int threads, p;
  double sync_start[SYNC_FIGURES], sync_end[SYNC_FIGURES];

  check(accel_state_wait_for_everyone(run->state), "accel_state_wait_for_everyone");
  memset(phase_s, 0, sizeof phase_s);
  read_sync_figures(run->model, sync_start);
  faults_start = minor_faults();
  cpu_start = cpu_s();
  start = now_s();
  for (i = 0; i < steps; ++i) {
    accel_tensor_free(loss); /* the previous step's: the last one is read to stop the clock */
    loss = next_step(run, run->profile);
    if (run->checkpoint_every > 0 && (i + 1) % run->checkpoint_every == 0 && i + 1 < steps) save_checkpoint(run);
  }
  if (run->checkpoint_every > 0 && run->checkpoint_background) {
    check(accel_state_wait_for_save(run->state), "accel_state_wait_for_save");
  }
  last_loss = loss_value(loss);
  elapsed = now_s() - start;
  cpu_elapsed = cpu_s() - cpu_start;
  faults = minor_faults() - faults_start;
  threads = thread_count();
  read_sync_figures(run->model, sync_end);
  accel_tensor_free(loss);

  if (!accel_state_is_main_process(run->state)) return;
  printf("accel processes=%d steps=%ld warmup=%ld step_ms=%.3f samples_per_s=%.1f first_loss=%.6f last_loss=%.6f "
         "omp_num_threads=%s threads=%d cpu_per_wall=%.2f page_faults_per_step=%.0f device=%s precision=%s",
         processes, steps, warmup, 1e3 * elapsed / (double)steps, (double)(processes * BATCH) * (double)steps / elapsed,
         (double)run->first_loss, (double)last_loss, omp ? omp : "unset", threads, cpu_elapsed / elapsed,
         (double)faults / (double)steps, accel_state_device(run->state), accel_state_mixed_precision(run->state));
  for (p = 0; p < SYNC_FIGURES; ++p) {
    printf(" sync_%s=%.3f", sync_names[p], (sync_end[p] - sync_start[p]) / (double)steps);
  }
  if (run->checkpoint_every > 0) {
    printf(" checkpoint_every=%ld checkpoint=%s", run->checkpoint_every,
           run->checkpoint_background ? "background" : "blocking");
  }
  if (run->graph_step != NULL) {
    const char *reason = accel_train_step_eager_reason(run->graph_step);
    printf(" train_step=graph replays=%ld captures=%ld", step_stat(run, "replays"), step_stat(run, "captures"));
    if (reason != NULL && reason[0] != '\0') printf(" eager_reason=\"%s\"", reason);
  }
  if (run->profile) {
    double sum = 0.0;
    for (p = 0; p < P_COUNT; ++p) {
      printf(" %s_ms=%.3f", phase_names[p], 1e3 * phase_s[p] / (double)steps);
      sum += phase_s[p];
    }
    printf(" phases_sum_ms=%.3f", 1e3 * sum / (double)steps);
  }
  {
    double gradient_bytes = 0.0, state_bytes = 0.0;
    check(accel_model_grad_sync_stat(run->model, "gradient_bytes", &gradient_bytes), "accel_model_grad_sync_stat");
    check(accel_model_grad_sync_stat(run->model, "optimizer_state_bytes", &state_bytes), "accel_model_grad_sync_stat");
    printf(" gradient_bytes=%.0f optimizer_state_bytes=%.0f", gradient_bytes, state_bytes);
  }
  printf("\n");
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *model_path = argc > 1 ? argv[1] : NULL;
  const long steps = argc > 2 ? atol(argv[2]) : 100;
  const long warmup = argc > 3 ? atol(argv[3]) : 10;
  struct run run;
  accel_options_t *optimizer_options = NULL, *model_options = NULL;
  const char *optimizer_kind = "sgd";
  char line[64];
  int serve = 0, graph = 0, usage = model_path == NULL || steps < 1 || warmup < 1, a, b;

  memset(&run, 0, sizeof run);
  for (a = 4; a < argc; ++a) {
    if (strcmp(argv[a], "profile") == 0) {
      run.profile = 1;
    } else if (strcmp(argv[a], "serve") == 0) {
      serve = 1;
    } else if (strcmp(argv[a], "graph") == 0) {
      graph = 1;
    } else if (strncmp(argv[a], "grad_compression=", 17) == 0) {
      if (model_options == NULL) check(accel_options_new(&model_options), "accel_options_new");
      check(accel_options_set_string(model_options, "grad_compression", argv[a] + 17), "grad_compression");
    } else if (strncmp(argv[a], "zero_stage=", 11) == 0) {
      if (model_options == NULL) check(accel_options_new(&model_options), "accel_options_new");
      check(accel_options_set_int(model_options, "zero_stage", atol(argv[a] + 11)), "zero_stage");
    } else if (strcmp(argv[a], "zero_cpu_offload") == 0) {
      if (model_options == NULL) check(accel_options_new(&model_options), "accel_options_new");
      check(accel_options_set_bool(model_options, "zero_cpu_offload", 1), "zero_cpu_offload");
    } else if (strcmp(argv[a], "optimizer=sgd") == 0 || strcmp(argv[a], "optimizer=adamw") == 0) {
      optimizer_kind = argv[a] + 10;
    } else if (strncmp(argv[a], "checkpoint_every=", 17) == 0) {
      run.checkpoint_every = atol(argv[a] + 17);
      usage |= run.checkpoint_every < 1;
    } else if (strcmp(argv[a], "checkpoint=blocking") == 0 || strcmp(argv[a], "checkpoint=background") == 0) {
      run.checkpoint_background = strcmp(argv[a], "checkpoint=background") == 0;
    } else if (strncmp(argv[a], "checkpoint_dir=", 15) == 0) {
      run.checkpoint_dir = argv[a] + 15;
    } else {
      usage = 1;
    }
  }
  usage |= run.checkpoint_every > 0 && run.checkpoint_dir == NULL;
  if (usage) {
    fprintf(stderr, "usage: train_accel MODEL [steps >= 1] [warmup >= 1] [profile] [serve] [graph] [grad_compression=no|bf16|fp16] "
                    "[checkpoint_every=N >= 1 checkpoint=blocking|background checkpoint_dir=DIR] [optimizer=sgd|adamw] [zero_stage=0|1|2|3]\n");
    return 2;
  }
  check(accel_state_new(&run.state, NULL), "accel_state_new");
  g_rank = accel_state_process_index(run.state);
  make_batches(run.state, g_rank, run.x, run.y);

  check(accel_model_load(&run.model, model_path), "accel_model_load");
  check(accel_state_prepare_model(run.state, run.model, model_options), "accel_state_prepare_model");
  check(accel_options_new(&optimizer_options), "accel_options_new");
  check(accel_options_set_double(optimizer_options, "lr", LR), "accel_options_set_double(lr)");
  if (strcmp(optimizer_kind, "adamw") == 0) {
    check(accel_options_set_double(optimizer_options, "weight_decay", 0.01), "accel_options_set_double(weight_decay)");
  }
  check(accel_optimizer_new(&run.optimizer, run.model, optimizer_kind, optimizer_options), "accel_optimizer_new");
  check(accel_model_train(run.model, 1), "accel_model_train");
  if (graph) {
    accel_options_t *step_options = NULL;
    check(accel_options_new(&step_options), "accel_options_new");
    check(accel_options_set_bool(step_options, "cuda_graph", 1), "accel_options_set_bool(cuda_graph)");
    check(accel_train_step_new(&run.graph_step, run.model, run.optimizer, step_options), "accel_train_step_new");
    accel_options_free(step_options);
  }

  warm_up(&run, warmup);
  if (!serve) {
    timed_round(&run, steps, warmup);
  } else {
    printf("ready\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL) {
      warm_up(&run, warmup);
      timed_round(&run, steps, warmup);
    }
  }

  check(accel_state_shutdown(run.state), "accel_state_shutdown");
  for (b = 0; b < BATCHES; ++b) {
    accel_tensor_free(run.x[b]);
    accel_tensor_free(run.y[b]);
  }
  accel_train_step_free(run.graph_step);
  accel_optimizer_free(run.optimizer);
  accel_options_free(optimizer_options);
  accel_options_free(model_options);
  accel_model_free(run.model);
  accel_state_free(run.state);
  return 0;
}
