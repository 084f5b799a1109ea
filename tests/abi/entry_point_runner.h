/* The table the generated entry-point test fills, and what the runner needs of each call. */
#ifndef ACCEL_ENTRY_POINT_RUNNER_H
#define ACCEL_ENTRY_POINT_RUNNER_H

#include <stddef.h>

/* What a call may pass: a block that looks like a freed-then-reused handle, a zeroed writable block for
 * other pointers, and two live handles of small kinds. */
struct entry_arguments {
  void *garbage;
  void *scratch;
  void *progress;   /* an accel_progress_t: 16 bytes, the smallest kind */
  void *bytes_list; /* an accel_bytes_list_t, passed where a progress bar is expected */
};

struct entry_point {
  const char *name;
  const char *mode; /* "null", "garbage" or "wrong_kind" */
  int (*call)(const struct entry_arguments *arguments);
};

extern const struct entry_point entry_points[];
extern const size_t entry_point_count;

#endif
