/* A C program built against the installed tree with `pkg-config --cflags --libs accel` (and through
 * find_package(accel)): it must compile, link and run. */
#include <stdio.h>

#include <accel.h>

int main(void) {
  accel_state_t *state = NULL;
  accel_tensor_t *input = NULL, *gathered = NULL;
  const int64_t shape[1] = {3};
  const float values[3] = {1, 2, 3};
  float out[3];
  if (accel_state_new(&state, NULL) != ACCEL_OK || accel_tensor_from_buffer(&input, values, ACCEL_DTYPE_FLOAT32, shape, 1) != ACCEL_OK ||
      accel_state_gather(state, input, &gathered) != ACCEL_OK || accel_tensor_copy_to_buffer(gathered, out, sizeof out) != ACCEL_OK) {
    fprintf(stderr, "consumer: %s\n", accel_error_last());
    return 1;
  }
  printf("accel %s on %s: gathered %g %g %g\n", accel_version_string(), accel_state_device(state), out[0], out[1], out[2]);
  accel_tensor_free(gathered);
  accel_tensor_free(input);
  accel_state_free(state);
  return out[2] == 3.0f ? 0 : 1;
}
