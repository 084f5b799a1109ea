/* Runs every generated entry-point call in a forked child: a child killed by a signal (a crash, an abort
 * from an exception that crossed the C ABI) or one that hangs fails the test, as does a fallible call
 * that accepted NULL or garbage. */
#define _POSIX_C_SOURCE 200809L
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
      void *garbage = reused_garbage();
      void *scratch = calloc(1, kBlock);
      if (garbage == NULL || scratch == NULL) _exit(3);
      _exit(entry_points[i].call(garbage, scratch));
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
