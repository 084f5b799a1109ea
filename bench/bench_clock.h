/* Clocks and counters both benchmark programs read. */
#ifndef ACCEL_BENCH_CLOCK_H
#define ACCEL_BENCH_CLOCK_H

#include <sys/resource.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Minor page faults of this process so far (allocations that touch fresh pages show up here). */
static inline long minor_faults(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

#endif
