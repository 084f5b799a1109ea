/* Compiled with -std=c99 -pedantic -Wall -Wextra -Werror (and as C++): the public header must stay clean. */
#include "accel.h"

int main(void) {
  accel_options_t *options = 0;
  return accel_options_new(&options) == ACCEL_OK ? (accel_options_free(options), 0) : 1;
}
