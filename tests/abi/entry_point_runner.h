/* The table the generated entry-point test fills, and what the runner needs of each call. */
#ifndef ACCEL_ENTRY_POINT_RUNNER_H
#define ACCEL_ENTRY_POINT_RUNNER_H

#include <stddef.h>

#include "accel/optimizer.h"

/* What a call may pass: a block that looks like a freed-then-reused handle, a zeroed writable block for
 * other pointers, and two live handles of small kinds. For the calls with a model in a refused state, the
 * model and valid other arguments: a one-process state, an optimizer over another (prepared TorchScript)
 * model, an input for its forward, and a fresh directory. */
struct entry_arguments {
  void *garbage;
  void *scratch;
  void *progress;   /* an accel_progress_t: 16 bytes, the smallest kind */
  void *bytes_list; /* an accel_bytes_list_t, passed where a progress bar is expected */
  void *model;      /* an accel_model_t in the state the mode names */
  void *state;
  void *optimizer;
  void *input;
  const char *directory;
  accel_external_step_fn step; /* a step callback that does nothing */
};

/* Writes tiny_models' MLP (forward(x [N, 8]) -> [N, 4]) as TorchScript to path; 1 on success. */
int write_tiny_torchscript(const char *path);

struct entry_point {
  const char *name;
  /* "null", "garbage", "wrong_kind", or the model state the call's model is in ("unprepared host",
   * "prepared host", "unprepared torchscript", "prepared torchscript") */
  const char *mode;
  int (*call)(const struct entry_arguments *arguments);
};

extern const struct entry_point entry_points[];
extern const size_t entry_point_count;

#endif
