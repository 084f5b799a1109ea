/* A tour of the process state and the collectives, meant to run on several processes:
 *   accel launch --nproc-per-node 2 -- build/bin/collectives_demo */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel.h"

static void check(int code, const char *what) {
  if (code != ACCEL_OK) {
    fprintf(stderr, "%s failed: %s (%s)\n", what, accel_error_last(), accel_error_name(code));
    exit(1);
  }
}

static void print_tensor(accel_state_t *state, const char *label, const accel_tensor_t *tensor) {
  float values[64];
  int64_t i, n = accel_tensor_numel(tensor);
  if (!accel_state_is_main_process(state)) return;
  check(accel_tensor_copy_to_buffer(tensor, values, sizeof values), "copy_to_buffer");
  printf("  %-28s [", label);
  for (i = 0; i < n; ++i) printf(i ? ", %g" : "%g", values[i]);
  printf("]\n");
}

int main(void) {
  accel_state_t *state = NULL;
  accel_tensor_t *mine = NULL, *gathered = NULL, *summed = NULL, *maxed = NULL, *padded = NULL, *ragged = NULL;
  accel_bytes_list_t *names = NULL;
  float values[2];
  int32_t rank, world;
  int64_t shape[1] = {2}, ragged_shape[1];
  char greeting[64];
  size_t i;

  check(accel_state_new(&state, NULL), "accel_state_new");
  rank = accel_state_process_index(state);
  world = accel_state_num_processes(state);
  printf("process %d of %d: local %d, device %s, distributed type %s, backend %s\n", rank, world,
         accel_state_local_process_index(state), accel_state_device(state), accel_state_distributed_type_name(state),
         accel_state_backend(state));
  fflush(stdout);
  check(accel_state_wait_for_everyone(state), "wait_for_everyone");

  values[0] = (float)(2 * rank + 1);
  values[1] = (float)(2 * rank + 2);
  check(accel_tensor_from_buffer(&mine, values, ACCEL_DTYPE_FLOAT32, shape, 1), "from_buffer");
  if (accel_state_is_main_process(state)) printf("collectives over %d processes (rank r holds [2r+1, 2r+2]):\n", world);
  check(accel_state_gather(state, mine, &gathered), "gather");
  print_tensor(state, "gather:", gathered);
  check(accel_state_reduce(state, mine, "sum", &summed), "reduce sum");
  print_tensor(state, "reduce(sum):", summed);
  check(accel_state_reduce(state, mine, "max", &maxed), "reduce max");
  print_tensor(state, "reduce(max):", maxed);

  ragged_shape[0] = rank + 1;
  check(accel_tensor_from_buffer(&ragged, values, ACCEL_DTYPE_FLOAT32, ragged_shape, 1), "from_buffer");
  check(accel_state_pad_across_processes(state, ragged, 0, -1.0, 0, &padded), "pad_across_processes");
  print_tensor(state, "rank 0 padded to the longest:", padded);

  check(accel_state_broadcast(state, mine, world - 1), "broadcast");
  print_tensor(state, "broadcast from last rank:", mine);

  snprintf(greeting, sizeof greeting, "hello from rank %d", rank);
  check(accel_state_gather_bytes(state, greeting, strlen(greeting), &names), "gather_bytes");
  if (accel_state_is_main_process(state)) {
    for (i = 0; i < accel_bytes_list_count(names); ++i) {
      const void *data;
      size_t size;
      check(accel_bytes_list_get(names, i, &data, &size), "bytes_list_get");
      printf("  gather_bytes[%zu]: %.*s\n", i, (int)size, (const char *)data);
    }
  }

  accel_bytes_list_free(names);
  accel_tensor_free(mine);
  accel_tensor_free(gathered);
  accel_tensor_free(summed);
  accel_tensor_free(maxed);
  accel_tensor_free(ragged);
  accel_tensor_free(padded);
  check(accel_state_shutdown(state), "shutdown");
  accel_state_free(state);
  return 0;
}
