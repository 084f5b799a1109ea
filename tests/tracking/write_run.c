/* Writes a run through the public tracking API for read_run_test.py to check:
 *   write_run DIR RUN FIRST_STEP LAST_STEP [overwrite]
 * logs "loss" = 1/(step+1) and "lr" = step/1000 at every step in [FIRST_STEP, LAST_STEP], and "accuracy"
 * = step/100 at every tenth step, with all three sinks. */
#include <stdio.h>
#include <stdlib.h>

#include "accel.h"

static int check(int code, const char *what) {
  if (code != ACCEL_OK) fprintf(stderr, "write_run: %s: %s\n", what, accel_error_last());
  return code != ACCEL_OK;
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: write_run DIR RUN FIRST_STEP LAST_STEP [overwrite]\n");
    return 2;
  }
  accel_state_t *state = NULL;
  accel_options_t *options = NULL;
  int failed = check(accel_state_new(&state, NULL), "accel_state_new") ||
               check(accel_options_new(&options), "accel_options_new") ||
               check(accel_options_set_string(options, "log_with", "jsonl,csv,tensorboard"), "log_with") ||
               check(accel_options_set_bool(options, "overwrite", argc == 6), "overwrite") ||
               check(accel_state_init_trackers(state, argv[1], argv[2], "{\"lr\": 0.001}", options), "init_trackers");
  const long first = atol(argv[3]), last = atol(argv[4]);
  for (long step = first; !failed && step <= last; ++step) {
    const char *names[] = {"loss", "lr"};
    const double values[] = {1.0 / (double)(step + 1), (double)step / 1000.0};
    failed = check(accel_state_log(state, names, values, 2, step), "log");
    if (!failed && step % 10 == 0) {
      const char *accuracy_name[] = {"accuracy"};
      const double accuracy[] = {(double)step / 100.0};
      failed = check(accel_state_log(state, accuracy_name, accuracy, 1, step), "log accuracy");
    }
  }
  failed = failed || check(accel_state_finish_trackers(state), "finish_trackers");
  accel_options_free(options);
  accel_state_free(state);
  return failed;
}
