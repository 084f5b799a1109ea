/* Runs every generated entry-point call in a forked child: a child killed by a signal (a crash, an abort
 * from an exception that crossed the C ABI, a sanitizer's report) or one that hangs fails the test, as
 * does a fallible call that accepted NULL, garbage or a handle of another kind, a *_free that freed a
 * handle of another kind, and a call with a model in a state its header refuses that did not return the
 * code the header names. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accel.h"
#include "entry_point_runner.h"

enum { kBlock = 4096, kSecondsPerCall = 20 };

/* What a handle pointer looks like after its object was freed and the memory reused: a block of the same
 * allocator, freed, taken again and overwritten. */
static void *reused_garbage(void) {
  accel_options_t *options = NULL;
  if (accel_options_new(&options) != ACCEL_OK) return NULL;
  accel_options_free(options);
  unsigned char *block = malloc(kBlock);
  if (block != NULL) memset(block, 0xA5, kBlock);
  return block;
}

/* Live handles of two small kinds, made in the child (a state of one process, a progress bar on it, and a
 * byte list gathered from it). */
static int make_small_handles(struct entry_arguments *arguments) {
  accel_state_t *state = NULL;
  if (accel_state_new(&state, NULL) != ACCEL_OK) return 0;
  accel_progress_t *progress = NULL;
  accel_bytes_list_t *list = NULL;
  const char byte = 1;
  if (accel_progress_new(&progress, state, 0, "") != ACCEL_OK) return 0;
  if (accel_state_gather_bytes(state, &byte, 1, &list) != ACCEL_OK) return 0;
  arguments->progress = progress;
  arguments->bytes_list = list;
  return 1;
}

/* A TorchScript model loaded from a file written here, prepared on state when asked. */
static accel_model_t *torchscript_model(accel_state_t *state, const char *directory, int prepared) {
  char path[512];
  snprintf(path, sizeof path, "%s/tiny_%d.pt", directory, prepared);
  accel_model_t *model = NULL;
  if (!write_tiny_torchscript(path) || accel_model_load(&model, path) != ACCEL_OK) return NULL;
  if (prepared && accel_state_prepare_model(state, model, NULL) != ACCEL_OK) return NULL;
  return model;
}

static int step_nothing(void *payload) {
  (void)payload;
  return 0;
}

/* For a mode that names a model state: the model in it, and the other arguments (see entry_arguments).
 * 1 when made, 0 when the mode is no model state, -1 on failure. */
static int make_model_arguments(struct entry_arguments *arguments, const char *mode) {
  const int host = strcmp(mode, "unprepared host") == 0 || strcmp(mode, "prepared host") == 0;
  const int script = strcmp(mode, "unprepared torchscript") == 0 || strcmp(mode, "prepared torchscript") == 0;
  if (!host && !script) return 0;
  static char directory[] = "/tmp/accel_entry_points_XXXXXX";
  if (mkdtemp(directory) == NULL) return -1;
  arguments->directory = directory;
  accel_state_t *state = NULL;
  if (accel_state_new(&state, NULL) != ACCEL_OK) return -1;
  arguments->state = state;
  accel_model_t *other = torchscript_model(state, directory, 1);
  accel_optimizer_t *optimizer = NULL;
  if (other == NULL || accel_optimizer_new(&optimizer, other, "sgd", NULL) != ACCEL_OK) return -1;
  arguments->optimizer = optimizer;
  arguments->step = step_nothing;
  const float values[16] = {0};
  const int64_t shape[] = {2, 8};
  accel_tensor_t *input = NULL;
  if (accel_tensor_from_buffer(&input, values, ACCEL_DTYPE_FLOAT32, shape, 2) != ACCEL_OK) return -1;
  arguments->input = input;
  const int prepared = strncmp(mode, "prepared", 8) == 0;
  accel_model_t *model = NULL;
  if (host) {
    const char *names[] = {"weight"};
    accel_tensor_t *parameters[] = {input};
    if (accel_model_from_tensors(&model, names, parameters, NULL, 1, NULL, NULL, 0) != ACCEL_OK) return -1;
    if (prepared && accel_state_prepare_model(state, model, NULL) != ACCEL_OK) return -1;
  } else {
    model = torchscript_model(state, directory, prepared);
  }
  arguments->model = model;
  return model != NULL ? 1 : -1;
}

/* The model-state call's directory, with the models written into it (a refused call writes nothing). */
static void remove_model_directory(const struct entry_arguments *arguments) {
  if (arguments->directory == NULL) return;
  for (int prepared = 0; prepared < 2; ++prepared) {
    char path[512];
    snprintf(path, sizeof path, "%s/tiny_%d.pt", arguments->directory, prepared);
    unlink(path);
  }
  rmdir(arguments->directory);
}

/* Whether the small handles survived the call: a *_free given another kind must leave it alone. */
static int small_handles_live(const struct entry_arguments *arguments) {
  return accel_progress_update((accel_progress_t *)arguments->progress, 0, NAN) == ACCEL_OK &&
         accel_bytes_list_count((const accel_bytes_list_t *)arguments->bytes_list) == 1;
}

int main(void) {
  size_t failures = 0;
  for (size_t i = 0; i < entry_point_count; ++i) {
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
      perror("fork");
      return 1;
    }
    if (child == 0) {
      alarm(kSecondsPerCall);
      /* The progress bar draws on stdout; the verdicts are the parent's. */
      if (freopen("/dev/null", "w", stdout) == NULL) _exit(3);
      struct entry_arguments arguments = {reused_garbage(), calloc(1, kBlock), NULL, NULL, NULL, NULL, NULL, NULL, NULL};
      if (arguments.garbage == NULL || arguments.scratch == NULL) _exit(3);
      if (make_model_arguments(&arguments, entry_points[i].mode) < 0) {
        fprintf(stderr, "cannot make the arguments of a %s model: %s\n", entry_points[i].mode, accel_error_last());
        _exit(6);
      }
      const int wrong_kind = strcmp(entry_points[i].mode, "wrong_kind") == 0;
      if (wrong_kind && !make_small_handles(&arguments)) _exit(4);
      const int status = entry_points[i].call(&arguments);
      remove_model_directory(&arguments);
      if (status == 0 && wrong_kind && !small_handles_live(&arguments)) _exit(5);
      _exit(status);
    }
    int status = 0;
    if (waitpid(child, &status, 0) < 0) {
      perror("waitpid");
      return 1;
    }
    if (WIFSIGNALED(status)) {
      printf("FAIL %s (%s): killed by signal %d (%s)\n", entry_points[i].name, entry_points[i].mode, WTERMSIG(status),
             strsignal(WTERMSIG(status)));
      ++failures;
    } else if (WEXITSTATUS(status) != 0) {
      printf("FAIL %s (%s): exit status %d\n", entry_points[i].name, entry_points[i].mode, WEXITSTATUS(status));
      ++failures;
    }
  }
  printf("%zu entry-point calls, %zu failed\n", entry_point_count, failures);
  return failures == 0 ? 0 : 1;
}
