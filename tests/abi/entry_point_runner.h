/* The table the generated entry-point test fills, and what the runner needs of each call. */
#ifndef ACCEL_ENTRY_POINT_RUNNER_H
#define ACCEL_ENTRY_POINT_RUNNER_H

#include <stddef.h>

struct entry_point {
  const char *name;
  const char *mode; /* "null" or "garbage" */
  int (*call)(void *garbage, void *scratch);
};

extern const struct entry_point entry_points[];
extern const size_t entry_point_count;

#endif
