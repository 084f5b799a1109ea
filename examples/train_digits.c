/* Trains an MLP (64-128-128-10) on the handwritten digits that Debian's python3-sklearn ships, on as
 * many processes as it is launched on, the way an Accelerate training script does:
 *
 *   /usr/bin/python3 examples/make_mlp.py build/demo/digits_mlp.pt 64 128 128 10
 *   accel launch --nproc-per-node 2 --cpu --master-port 0 -- build/bin/train_digits --project-dir build/demo
 *
 * The data: 1797 rows of 64 pixel values (0..16) and a label, read from sklearn's digits.csv.gz through
 * `gzip -dc` (popen), pixels scaled to [0, 1]. The rows are shuffled with a fixed seed, then the last 360
 * are held out for the test. Training: AdamW with a cosine schedule and warmup, gradients clipped to norm 1,
 * a progress bar (accel_progress_*) and the mean loss of each epoch (over every rank) on the main process;
 * the loss and lr of every optimizer step are logged to DIR/logs (metrics.jsonl, metrics.csv and a
 * TensorBoard event file; `accel plot DIR/logs` draws them). Evaluation: argmax
 * of the logits, gathered with accel_state_gather_for_metrics so each test sample counts once. The final model
 * is saved into DIR/model/ with accel_state_save_model, and the last line printed is the test accuracy.
 *
 * Options: --project-dir DIR (build/demo), --model PATH (DIR/digits_mlp.pt), --data PATH (sklearn's
 * digits.csv.gz, or a plain .csv), --epochs E (20), --lr LR (0.01), --max-steps N (stop after N optimizer
 * steps; 0 only evaluates), --checkpoint-every K (save a checkpoint every K optimizer steps, into
 * DIR/checkpoints/checkpoint_<i>) and --resume (continue from the latest of those checkpoints, exactly where
 * it stopped: same weights, optimizer, schedule, batch order and position in the epoch).
 *
 * Restarted by `accel launch --max-restarts N` after a rank failed (ACCEL_RESTART_COUNT > 0), it resumes
 * by itself from the latest checkpoint when there is one, and starts afresh when none was written yet. */
#define _POSIX_C_SOURCE 200809L /* popen, pclose */

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accel.h"

#define DEFAULT_DATA "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
#define DEFAULT_PROJECT_DIR "build/demo"
#define MODEL_FILE_NAME "digits_mlp.pt"

enum {
  PIXELS = 64,
  CLASSES = 10,
  TEST_ROWS = 360,
  TRAIN_BATCH = 32, /* per process */
  TEST_BATCH = 64,  /* per process */
  TRAIN_DATA_SEED = 42,
  SPLIT_SEED = 0
};

typedef struct {
  const char *project_dir;
  const char *model_path; /* NULL: DIR/digits_mlp.pt */
  const char *data_path;
  long epochs;
  double lr;
  long max_steps;        /* -1: no limit */
  long checkpoint_every; /* -1: not given */
  int resume;
} args_t;

static int g_rank = -1;

/* Reports a failed accel call (function name, error code, library message) and gives the code back. */
static int report(int code, const char *call) {
  fprintf(stderr, "train_digits (rank %d): %.*s failed: %s: %s\n", g_rank, (int)strcspn(call, "("), call,
          accel_error_name(code), accel_error_last());
  return code;
}

/* Every accel call goes through CHECK: on failure, report it and jump to the clean-up. */
#define CHECK(call)                           \
  do {                                        \
    int code_ = (call);                       \
    if (code_ != ACCEL_OK) {                  \
      report(code_, #call);                   \
      goto done;                              \
    }                                         \
  } while (0)

#define FAIL(...)                                         \
  do {                                                    \
    fprintf(stderr, "train_digits (rank %d): ", g_rank); \
    fprintf(stderr, __VA_ARGS__);                         \
    fputc('\n', stderr);                                  \
    goto done;                                            \
  } while (0)

static void usage(FILE *to) {
  fputs("usage: train_digits [--project-dir DIR] [--model PATH] [--data PATH] [--epochs E] [--lr LR]\n"
        "                    [--max-steps N] [--checkpoint-every K] [--resume]\n"
        "--resume continues from the latest checkpoint in DIR/checkpoints; restarted by\n"
        "`accel launch --max-restarts N` (ACCEL_RESTART_COUNT > 0), it does so by itself when one exists\n"
        "run it through `accel launch` for several processes; see the comment at the top of train_digits.c\n",
        to);
}

static int parse_long(const char *flag, const char *text, long min, long *out) {
  char *end;
  long value;
  errno = 0;
  value = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min) {
    fprintf(stderr, "train_digits: %s wants an integer >= %ld, got '%s'\n", flag, min, text);
    return -1;
  }
  *out = value;
  return 0;
}

static int parse_args(int argc, char **argv, args_t *args) {
  int i;
  args->project_dir = DEFAULT_PROJECT_DIR;
  args->model_path = NULL;
  args->data_path = DEFAULT_DATA;
  args->epochs = 20;
  args->lr = 1e-2;
  args->max_steps = -1;
  args->checkpoint_every = -1;
  args->resume = 0;
  for (i = 1; i < argc; ++i) {
    const char *flag = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    int takes_value = 1;
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(flag, "--resume") == 0) {
      args->resume = 1;
      takes_value = 0;
    } else if (value == NULL) {
      if (strcmp(flag, "--project-dir") == 0 || strcmp(flag, "--model") == 0 || strcmp(flag, "--data") == 0 ||
          strcmp(flag, "--epochs") == 0 || strcmp(flag, "--lr") == 0 || strcmp(flag, "--max-steps") == 0 ||
          strcmp(flag, "--checkpoint-every") == 0) {
        fprintf(stderr, "train_digits: %s needs a value\n", flag);
      } else {
        fprintf(stderr, "train_digits: unknown argument '%s'\n", flag);
        usage(stderr);
      }
      return -1;
    } else if (strcmp(flag, "--project-dir") == 0) {
      args->project_dir = value;
    } else if (strcmp(flag, "--model") == 0) {
      args->model_path = value;
    } else if (strcmp(flag, "--data") == 0) {
      args->data_path = value;
    } else if (strcmp(flag, "--epochs") == 0) {
      if (parse_long(flag, value, 1, &args->epochs) != 0) return -1;
    } else if (strcmp(flag, "--lr") == 0) {
      char *end;
      args->lr = strtod(value, &end);
      if (end == value || *end != '\0' || !(args->lr > 0.0)) {
        fprintf(stderr, "train_digits: --lr wants a positive number, got '%s'\n", value);
        return -1;
      }
    } else if (strcmp(flag, "--max-steps") == 0) {
      if (parse_long(flag, value, 0, &args->max_steps) != 0) return -1;
    } else if (strcmp(flag, "--checkpoint-every") == 0) {
      if (parse_long(flag, value, 1, &args->checkpoint_every) != 0) return -1;
    } else {
      fprintf(stderr, "train_digits: unknown argument '%s'\n", flag);
      usage(stderr);
      return -1;
    }
    i += takes_value;
  }
  return 0;
}

/* Whether DIR/checkpoints holds a numbered checkpoint for accel_state_load_state to resume from: a folder
 * checkpoint_<digits> (one still being written ends in .saving). */
static int has_checkpoint(const char *project_dir) {
  static const char prefix[] = "checkpoint_";
  char directory[PATH_MAX], folder[PATH_MAX];
  struct dirent *entry;
  struct stat info;
  DIR *listing;
  int found = 0;
  if (snprintf(directory, sizeof directory, "%s/checkpoints", project_dir) >= (int)sizeof directory) return 0;
  if ((listing = opendir(directory)) == NULL) return 0;
  while (!found && (entry = readdir(listing)) != NULL) {
    const char *digits;
    if (strncmp(entry->d_name, prefix, sizeof prefix - 1) != 0) continue;
    digits = entry->d_name + sizeof prefix - 1;
    if (*digits == '\0' || digits[strspn(digits, "0123456789")] != '\0') continue;
    found = snprintf(folder, sizeof folder, "%s/%s", directory, entry->d_name) < (int)sizeof folder &&
            stat(folder, &info) == 0 && S_ISDIR(info.st_mode);
  }
  closedir(listing);
  return found;
}

/* Reads rows of 64 pixels (0..16) and a label (0..9), comma-separated, from a .csv or, through
 * `gzip -dc`, a .csv.gz. On success *pixels (scaled to [0, 1]) and *labels are malloc'ed. */
static int read_digits(const char *path, float **pixels, int64_t **labels, int64_t *rows) {
  size_t length = strlen(path), capacity = 0, count = 0;
  int compressed = length > 3 && strcmp(path + length - 3, ".gz") == 0;
  float *x = NULL;
  int64_t *y = NULL;
  char line[1024];
  FILE *file;
  int ok = 1;

  *pixels = NULL;
  *labels = NULL;
  *rows = 0;
  if (compressed) {
    char command[PATH_MAX + 32];
    if (strchr(path, '\'') != NULL || length > PATH_MAX) {
      fprintf(stderr, "train_digits: cannot pass the data path '%s' to gzip\n", path);
      return -1;
    }
    snprintf(command, sizeof command, "gzip -dc -- '%s'", path);
    file = popen(command, "r");
  } else {
    file = fopen(path, "r");
  }
  if (file == NULL) {
    fprintf(stderr, "train_digits: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  while (ok && fgets(line, sizeof line, file) != NULL) {
    char *cursor = line, *end;
    int column;
    if (strchr(line, '\n') == NULL && !feof(file)) {
      fprintf(stderr, "train_digits: %s: line %zu is too long\n", path, count + 1);
      ok = 0;
      break;
    }
    if (line[strspn(line, " \t\r\n")] == '\0') continue; /* blank line */
    if (count == capacity) {
      size_t grown = capacity ? 2 * capacity : 2048;
      float *new_x = realloc(x, grown * PIXELS * sizeof *x);
      int64_t *new_y;
      if (new_x == NULL) {
        ok = 0;
        break;
      }
      x = new_x;
      new_y = realloc(y, grown * sizeof *y);
      if (new_y == NULL) {
        ok = 0;
        break;
      }
      y = new_y;
      capacity = grown;
    }
    for (column = 0; column <= PIXELS; ++column) {
      long value;
      errno = 0;
      value = strtol(cursor, &end, 10);
      int bad = end == cursor || errno != 0 || value < 0 || value > (column < PIXELS ? 16 : CLASSES - 1);
      if (column < PIXELS)
        bad = bad || *end != ',';
      else
        bad = bad || end[strspn(end, " \t\r\n")] != '\0';
      if (bad) {
        fprintf(stderr, "train_digits: %s: line %zu, column %d: not a %s\n", path, count + 1, column + 1,
                column < PIXELS ? "pixel value 0..16 followed by a comma" : "label 0..9 ending the line");
        ok = 0;
        break;
      }
      if (column < PIXELS)
        x[count * PIXELS + (size_t)column] = (float)value / 16.0f;
      else
        y[count] = value;
      cursor = end + 1;
    }
    if (ok) ++count;
  }
  if (ok && ferror(file)) {
    fprintf(stderr, "train_digits: error reading %s\n", path);
    ok = 0;
  }
  if (compressed) {
    int status = pclose(file);
    if (ok && status != 0) {
      if (status != -1 && WIFEXITED(status))
        fprintf(stderr, "train_digits: `gzip -dc %s` failed with exit code %d\n", path, WEXITSTATUS(status));
      else
        fprintf(stderr, "train_digits: `gzip -dc %s` failed (wait status %d)\n", path, status);
      ok = 0;
    }
  } else {
    fclose(file);
  }
  if (ok && count <= TEST_ROWS) {
    fprintf(stderr, "train_digits: %s has %zu rows; more than %d are needed\n", path, count, TEST_ROWS);
    ok = 0;
  }
  if (!ok) {
    free(x);
    free(y);
    return -1;
  }
  *pixels = x;
  *labels = y;
  *rows = (int64_t)count;
  return 0;
}

/* splitmix64: a small, portable generator for the fixed shuffle of the rows before the split. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Fisher-Yates over the rows, the same on every rank (fixed seed), in place. */
static void shuffle_rows(float *x, int64_t *y, int64_t rows, uint64_t seed) {
  float row[PIXELS];
  int64_t i;
  for (i = rows - 1; i > 0; --i) {
    int64_t j = (int64_t)(splitmix64(&seed) % (uint64_t)(i + 1));
    int64_t label = y[i];
    memcpy(row, x + i * PIXELS, sizeof row);
    memcpy(x + i * PIXELS, x + j * PIXELS, sizeof row);
    memcpy(x + j * PIXELS, row, sizeof row);
    y[i] = y[j];
    y[j] = label;
  }
}

/* A dataset of rows [first, first + count): "x" float32 [count, 64], "y" int64 [count]. */
static int make_dataset(const float *x, const int64_t *y, int64_t first, int64_t count, accel_dataset_t **out) {
  static const char *const names[2] = {"x", "y"};
  accel_tensor_t *tensors[2] = {NULL, NULL};
  int64_t x_shape[2], y_shape[1];
  int code;
  x_shape[0] = count;
  x_shape[1] = PIXELS;
  y_shape[0] = count;
  *out = NULL;
  code = accel_tensor_from_buffer(&tensors[0], x + first * PIXELS, ACCEL_DTYPE_FLOAT32, x_shape, 2);
  if (code != ACCEL_OK) {
    report(code, "accel_tensor_from_buffer(x)");
  } else if ((code = accel_tensor_from_buffer(&tensors[1], y + first, ACCEL_DTYPE_INT64, y_shape, 1)) != ACCEL_OK) {
    report(code, "accel_tensor_from_buffer(y)");
  } else if ((code = accel_dataset_from_tensors(out, names, tensors, 2)) != ACCEL_OK) {
    report(code, "accel_dataset_from_tensors");
  }
  accel_tensor_free(tensors[0]); /* the dataset shares them */
  accel_tensor_free(tensors[1]);
  return code;
}

int main(int argc, char **argv) {
  args_t args;
  int exit_code = 1, is_main = 0, resume;
  long steps_done = 0, restart_count = 0;
  const char *restarts = getenv("ACCEL_RESTART_COUNT");
  float *pixels = NULL;
  int64_t *labels = NULL, *gathered_predictions = NULL, *gathered_labels = NULL, rows = 0, train_rows = 0;
  float *logit_values = NULL;
  int64_t predictions[TEST_BATCH];
  char model_path[PATH_MAX], save_dir[PATH_MAX];

  accel_state_t *state = NULL;
  accel_options_t *train_options = NULL, *test_options = NULL, *optimizer_options = NULL, *scheduler_options = NULL;
  accel_dataset_t *train_set = NULL, *test_set = NULL;
  accel_loader_t *train_loader = NULL, *test_loader = NULL;
  accel_model_t *model = NULL;
  accel_optimizer_t *optimizer = NULL;
  accel_scheduler_t *scheduler = NULL;
  accel_options_t *tracker_options = NULL, *state_options = NULL;
  accel_progress_t *progress = NULL;
  accel_batch_t *batch = NULL;
  accel_output_t *output = NULL;
  accel_tensor_t *x = NULL, *y = NULL, *logits = NULL, *loss = NULL, *local = NULL, *global = NULL;
  accel_tensor_t *prediction_tensor = NULL, *all_predictions = NULL, *all_labels = NULL;

  if (parse_args(argc, argv, &args) != 0) return 2;
  if (restarts != NULL && parse_long("ACCEL_RESTART_COUNT", restarts, 0, &restart_count) != 0) return 2;
  /* A restarted job continues from the checkpoint the failed attempt left, if it got as far as one. */
  resume = args.resume || (restart_count > 0 && has_checkpoint(args.project_dir));
  if (args.model_path == NULL) {
    if (snprintf(model_path, sizeof model_path, "%s/%s", args.project_dir, MODEL_FILE_NAME) >= (int)sizeof model_path)
      FAIL("--project-dir is too long");
  } else if (snprintf(model_path, sizeof model_path, "%s", args.model_path) >= (int)sizeof model_path) {
    FAIL("--model is too long");
  }
  if (snprintf(save_dir, sizeof save_dir, "%s/model", args.project_dir) >= (int)sizeof save_dir)
    FAIL("--project-dir is too long");

  /* The launcher's environment says how many processes there are and where rank 0 listens.
   * Numbered checkpoints go to DIR/checkpoints/checkpoint_<i>, the last 3 kept. */
  CHECK(accel_options_new(&state_options));
  CHECK(accel_options_set_string(state_options, "project_dir", args.project_dir));
  CHECK(accel_options_set_int(state_options, "total_limit", 3));
  CHECK(accel_state_new(&state, state_options));
  g_rank = accel_state_process_index(state);
  is_main = accel_state_is_main_process(state);

  /* Data: every rank reads the same file and makes the same split. */
  if (read_digits(args.data_path, &pixels, &labels, &rows) != 0) goto done;
  shuffle_rows(pixels, labels, rows, SPLIT_SEED);
  train_rows = rows - TEST_ROWS;
  if (make_dataset(pixels, labels, 0, train_rows, &train_set) != ACCEL_OK) goto done;
  if (make_dataset(pixels, labels, train_rows, TEST_ROWS, &test_set) != ACCEL_OK) goto done;
  free(pixels); /* the datasets hold copies */
  free(labels);
  pixels = NULL;
  labels = NULL;

  CHECK(accel_options_new(&train_options));
  CHECK(accel_options_set_int(train_options, "batch_size", TRAIN_BATCH));
  CHECK(accel_options_set_bool(train_options, "shuffle", 1));
  CHECK(accel_options_set_int(train_options, "data_seed", TRAIN_DATA_SEED));
  CHECK(accel_loader_new(&train_loader, state, train_set, train_options));
  CHECK(accel_options_new(&test_options));
  CHECK(accel_options_set_int(test_options, "batch_size", TEST_BATCH));
  CHECK(accel_options_set_bool(test_options, "shuffle", 0));
  CHECK(accel_loader_new(&test_loader, state, test_set, test_options));

  /* Model, optimizer (no weight decay on biases), schedule. */
  {
    int code = accel_model_load(&model, model_path);
    if (code != ACCEL_OK) {
      report(code, "accel_model_load");
      if (is_main && code == ACCEL_ERR_IO)
        fprintf(stderr, "train_digits: write the model first: /usr/bin/python3 examples/make_mlp.py %s 64 128 128 10\n",
                model_path);
      goto done;
    }
  }
  CHECK(accel_state_prepare_model(state, model, NULL));
  CHECK(accel_options_new(&optimizer_options));
  CHECK(accel_options_set_double(optimizer_options, "lr", args.lr));
  CHECK(accel_options_set_double(optimizer_options, "weight_decay", 0.01));
  CHECK(accel_options_set_string(optimizer_options, "no_decay", "*bias"));
  CHECK(accel_optimizer_new(&optimizer, model, "adamw", optimizer_options));
  {
    /* Sized in single-process steps (Accelerate's rule: the scheduler steps once per process for each
     * optimizer step), so the schedule ends with the training whatever the number of processes. */
    int64_t single_process_steps = args.epochs * ((train_rows + TRAIN_BATCH - 1) / TRAIN_BATCH);
    CHECK(accel_options_new(&scheduler_options));
    CHECK(accel_options_set_int(scheduler_options, "total_steps", single_process_steps));
    CHECK(accel_options_set_int(scheduler_options, "warmup_steps", single_process_steps / 20));
    CHECK(accel_scheduler_new(&scheduler, optimizer, "cosine", scheduler_options));
  }

  /* Loss and lr of every optimizer step go to DIR/logs (JSONL, CSV, TensorBoard); `accel plot DIR/logs`
   * draws them. A fresh run starts the logs afresh; a resumed one would continue them. */
  {
    char config[256];
    snprintf(config, sizeof config, "{\"lr\": %g, \"epochs\": %ld, \"batch_size\": %d, \"optimizer\": \"adamw\"}",
             args.lr, args.epochs, TRAIN_BATCH);
    CHECK(accel_options_new(&tracker_options));
    CHECK(accel_options_set_bool(tracker_options, "overwrite", !resume));
    CHECK(accel_state_init_trackers(state, args.project_dir, "logs", config, tracker_options));
  }

  {
    int64_t steps_per_epoch = 0;
    /* Read before resuming: a resumed loader's length leaves out the batches it will skip. */
    CHECK(accel_loader_length(train_loader, &steps_per_epoch));
    if (resume) {
      CHECK(accel_state_load_state(state, NULL, &model, 1, &optimizer, 1, &scheduler, 1, &train_loader, 1));
      if (is_main) printf("resumed from the latest checkpoint of %s/checkpoints\n", args.project_dir);
    } else if (is_main && restart_count > 0) {
      printf("restarted before any checkpoint in %s/checkpoints: starting afresh\n", args.project_dir);
    }
    long total_steps = args.epochs * (long)steps_per_epoch, epoch;
    /* Optimizer steps already done (the scheduler moves once per process for each, Accelerate's rule);
     * a resumed loader continues in the epoch it was saved in. */
    long steps = (long)(accel_scheduler_step_count(scheduler) / accel_state_num_processes(state));
    const long first_epoch = (long)accel_loader_epoch(train_loader);
    if (args.max_steps >= 0 && args.max_steps < total_steps) total_steps = args.max_steps;
    if (is_main) {
      printf("digits: %lld training rows, %d test rows; MLP 64-128-128-10 (%zu parameter tensors); %d process%s "
             "(%s, %s)\n",
             (long long)train_rows, TEST_ROWS, accel_model_num_parameters(model), accel_state_num_processes(state),
             accel_state_num_processes(state) == 1 ? "" : "es", accel_state_distributed_type_name(state),
             accel_state_device(state));
      printf("training: %ld epochs of %lld steps per process, batch %d per process, adamw lr %g, cosine schedule\n",
             args.epochs, (long long)steps_per_epoch, TRAIN_BATCH, args.lr);
      if (args.max_steps >= 0) printf("stopping after %ld optimizer steps (--max-steps)\n", args.max_steps);
      fflush(stdout);
    }
    CHECK(accel_progress_new(&progress, state, total_steps > steps ? total_steps - steps : 0, "training"));

    for (epoch = first_epoch; epoch < args.epochs && steps < total_steps; ++epoch) {
      double loss_sum = 0.0, epoch_loss;
      long batches = 0;
      float value;
      CHECK(accel_model_train(model, 1));
      for (;;) {
        int sync;
        CHECK(accel_loader_next(train_loader, &batch));
        if (batch == NULL) break; /* end of the epoch */
        CHECK(accel_batch_get(batch, "x", &x));
        CHECK(accel_batch_get(batch, "y", &y));

        CHECK(accel_state_accumulate(state));
        CHECK(accel_model_forward(model, &x, 1, NULL, NULL, 0, &output));
        CHECK(accel_output_get(output, 0, &logits));
        CHECK(accel_loss_compute(&loss, "cross_entropy", logits, y, NULL));
        CHECK(accel_state_backward(state, loss));
        sync = accel_state_sync_gradients(state);
        if (sync) CHECK(accel_state_clip_grad_norm(state, model, 1.0, 2.0, NULL));
        CHECK(accel_optimizer_step(optimizer));
        CHECK(accel_scheduler_step(scheduler));
        CHECK(accel_optimizer_zero_grad(optimizer));

        if (accel_tensor_dtype(loss) != ACCEL_DTYPE_FLOAT32 || accel_tensor_numel(loss) != 1)
          FAIL("the loss is not a float32 scalar (dtype %d, %lld elements)", (int)accel_tensor_dtype(loss),
               (long long)accel_tensor_numel(loss));
        CHECK(accel_tensor_copy_to_buffer(loss, &value, sizeof value));
        loss_sum += (double)value;
        ++batches;
        if (sync) {
          const char *names[] = {"loss", "lr"};
          double logged[2];
          logged[0] = (double)value;
          ++steps;
          CHECK(accel_scheduler_last_lr(scheduler, 0, &logged[1]));
          CHECK(accel_state_log(state, names, logged, 2, steps));
          CHECK(accel_progress_update(progress, 1, (double)value));
          if (args.checkpoint_every > 0 && steps % args.checkpoint_every == 0)
            CHECK(accel_state_save_state(state, NULL, &model, 1, &optimizer, 1, &scheduler, 1, &train_loader, 1));
        }

        accel_tensor_free(loss);
        accel_tensor_free(logits);
        accel_output_free(output);
        accel_tensor_free(y);
        accel_tensor_free(x);
        accel_batch_free(batch);
        loss = logits = y = x = NULL;
        output = NULL;
        batch = NULL;

        if (steps >= total_steps) break; /* --max-steps: every rank stops at the same step */
      }

      /* The mean loss over every rank (each rank has as many batches: even_batches). */
      {
        float mean = batches > 0 ? (float)(loss_sum / (double)batches) : 0.0f;
        int64_t one = 1;
        CHECK(accel_tensor_from_buffer(&local, &mean, ACCEL_DTYPE_FLOAT32, &one, 1));
        CHECK(accel_state_reduce(state, local, "mean", &global));
        CHECK(accel_tensor_copy_to_buffer(global, &mean, sizeof mean));
        epoch_loss = (double)mean;
        accel_tensor_free(local);
        accel_tensor_free(global);
        local = global = NULL;
      }
      {
        double last_lr = 0;
        char line[160];
        CHECK(accel_scheduler_last_lr(scheduler, 0, &last_lr));
        snprintf(line, sizeof line, "epoch %2ld/%ld  loss %.4f  lr %.2e%s", epoch + 1, args.epochs, epoch_loss, last_lr,
                 batches < steps_per_epoch ? "  (stopped early: --max-steps)" : "");
        CHECK(accel_state_print(state, line));
      }
    }
    accel_progress_free(progress); /* the bar stays, finished */
    progress = NULL;
    steps_done = steps;
  }

  /* Evaluation: predictions and labels of every rank, the samples that pad the last batch dropped. */
  {
    int64_t correct = 0, counted = 0;
    CHECK(accel_model_train(model, 0));
    for (;;) {
      const int64_t *shape;
      int64_t n, i, one_dim[1];
      CHECK(accel_loader_next(test_loader, &batch));
      if (batch == NULL) break;
      CHECK(accel_batch_get(batch, "x", &x));
      CHECK(accel_batch_get(batch, "y", &y));
      CHECK(accel_model_evaluate(model, &x, 1, NULL, NULL, 0, &output));
      CHECK(accel_output_get(output, 0, &logits));
      shape = accel_tensor_shape(logits);
      if (accel_tensor_ndim(logits) != 2 || shape[1] != CLASSES || shape[0] > TEST_BATCH ||
          accel_tensor_dtype(logits) != ACCEL_DTYPE_FLOAT32)
        FAIL("unexpected logits: %zu dimensions, dtype %d", accel_tensor_ndim(logits), (int)accel_tensor_dtype(logits));
      n = shape[0];
      if (logit_values == NULL && (logit_values = malloc(sizeof *logit_values * TEST_BATCH * CLASSES)) == NULL)
        FAIL("out of memory");
      CHECK(accel_tensor_copy_to_buffer(logits, logit_values, sizeof *logit_values * TEST_BATCH * CLASSES));
      for (i = 0; i < n; ++i) {
        const float *row = logit_values + i * CLASSES;
        int best = 0, c;
        for (c = 1; c < CLASSES; ++c)
          if (row[c] > row[best]) best = c;
        predictions[i] = best;
      }
      one_dim[0] = n;
      CHECK(accel_tensor_from_buffer(&prediction_tensor, predictions, ACCEL_DTYPE_INT64, one_dim, 1));
      CHECK(accel_state_gather_for_metrics(state, prediction_tensor, &all_predictions));
      CHECK(accel_state_gather_for_metrics(state, y, &all_labels));
      if (is_main) {
        int64_t m = accel_tensor_numel(all_predictions);
        if (m != accel_tensor_numel(all_labels))
          FAIL("gather_for_metrics gave %lld predictions but %lld labels", (long long)m,
               (long long)accel_tensor_numel(all_labels));
        if (m > 0) {
          gathered_predictions = malloc(sizeof *gathered_predictions * (size_t)m);
          gathered_labels = malloc(sizeof *gathered_labels * (size_t)m);
          if (gathered_predictions == NULL || gathered_labels == NULL) FAIL("out of memory");
          CHECK(accel_tensor_copy_to_buffer(all_predictions, gathered_predictions, sizeof *gathered_predictions * (size_t)m));
          CHECK(accel_tensor_copy_to_buffer(all_labels, gathered_labels, sizeof *gathered_labels * (size_t)m));
          for (i = 0; i < m; ++i) correct += gathered_predictions[i] == gathered_labels[i];
          counted += m;
          free(gathered_predictions);
          free(gathered_labels);
          gathered_predictions = gathered_labels = NULL;
        }
      }
      accel_tensor_free(all_labels);
      accel_tensor_free(all_predictions);
      accel_tensor_free(prediction_tensor);
      accel_tensor_free(logits);
      accel_output_free(output);
      accel_tensor_free(y);
      accel_tensor_free(x);
      accel_batch_free(batch);
      all_labels = all_predictions = prediction_tensor = logits = y = x = NULL;
      output = NULL;
      batch = NULL;
    }

    CHECK(accel_state_save_model(state, model, save_dir, 0));
    if (is_main) {
      if (counted != TEST_ROWS)
        FAIL("evaluation counted %lld test samples, not %d: accel_state_gather_for_metrics dropped or repeated some",
             (long long)counted, TEST_ROWS);
      printf("saved the model to %s/model.safetensors\n", save_dir);
      printf("test: %lld of %lld samples classified correctly\n", (long long)correct, (long long)counted);
      printf("test accuracy: %.2f\n", (double)correct / (double)counted);
      fflush(stdout);
    }
    {
      const char *names[] = {"test_accuracy"};
      const double accuracy = counted > 0 ? (double)correct / (double)counted : 0.0;
      CHECK(accel_state_log(state, names, &accuracy, 1, steps_done));
    }
  }
  CHECK(accel_state_finish_trackers(state));

  CHECK(accel_state_shutdown(state));
  exit_code = 0;

done:
  accel_progress_free(progress);
  free(gathered_predictions);
  free(gathered_labels);
  free(logit_values);
  free(pixels);
  free(labels);
  accel_tensor_free(all_labels);
  accel_tensor_free(all_predictions);
  accel_tensor_free(prediction_tensor);
  accel_tensor_free(global);
  accel_tensor_free(local);
  accel_tensor_free(loss);
  accel_tensor_free(logits);
  accel_output_free(output);
  accel_tensor_free(y);
  accel_tensor_free(x);
  accel_batch_free(batch);
  accel_scheduler_free(scheduler);
  accel_optimizer_free(optimizer);
  accel_model_free(model);
  accel_loader_free(test_loader);
  accel_loader_free(train_loader);
  accel_dataset_free(test_set);
  accel_dataset_free(train_set);
  accel_options_free(tracker_options);
  accel_options_free(state_options);
  accel_options_free(scheduler_options);
  accel_options_free(optimizer_options);
  accel_options_free(test_options);
  accel_options_free(train_options);
  accel_state_free(state);
  return exit_code;
}
