/* The accel and memcpy halves of the loader benchmark (bench/run_loader.sh runs them, interleaved with
 * bench/loader_torch.py, and compares). Uses only the public C API.
 *
 *   loader_bench accel  [epochs] [warmup_epochs]   a prepared loader (batch 64, shuffle, fixed data_seed);
 *                                                  the line also splits the time per batch (next, get and
 *                                                  touch, free) and gives, for reference, a bare gather
 *                                                  memcpy of the same rows' bytes from the dataset's memory
 *   loader_bench memcpy [epochs] [warmup_epochs]   the same bytes in the same batches (64 rows, the last
 *                                                  one 32), as contiguous blocks; plus a gather memcpy of
 *                                                  the rows in a shuffled order (run_loader.sh's R3)
 *
 * The dataset is 60000 x 784 float32 ("x") with int64 labels 0..9 ("y"). Each mode prints one line of
 * key=value pairs that run_loader.sh parses. Timing is wall clock (CLOCK_MONOTONIC) over whole epochs
 * after the warm-up epochs; bytes are those of the rows delivered (784 * 4 + 8 a row). */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "accel.h"
#include "bench_clock.h"

#define ROWS 60000
#define COLS 784
#define BATCH 64
#define DATA_SEED 1234

static void check(int code, const char *what) {
  if (code != ACCEL_OK) {
    fprintf(stderr, "loader_bench: %s failed: %s (%s)\n", what, accel_error_last(), accel_error_name(code));
    exit(1);
  }
}

/* xorshift64*: fast, deterministic, good enough for benchmark data. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

static float *x_data;
static int64_t *y_data;

static void make_data(void) {
  size_t i;
  x_data = malloc(sizeof(float) * (size_t)ROWS * COLS);
  y_data = malloc(sizeof(int64_t) * ROWS);
  if (!x_data || !y_data) {
    fprintf(stderr, "loader_bench: out of memory\n");
    exit(1);
  }
  for (i = 0; i < (size_t)ROWS * COLS; ++i) x_data[i] = (float)(rng_next() >> 40) * (1.0f / 16777216.0f);
  for (i = 0; i < ROWS; ++i) y_data[i] = (int64_t)(rng_next() % 10);
}

static const int64_t batches_per_epoch = (ROWS + BATCH - 1) / BATCH;

/* Bytes n rows carry: n * (784 * 4 + 8). */
static double batch_bytes(int64_t n) { return (double)n * (COLS * sizeof(float) + sizeof(int64_t)); }

static volatile double sink; /* what the touches add up to, so nothing is optimised away */

/* Four shuffled orders of the rows (Fisher-Yates), made outside the timed parts; epochs cycle through them. */
static int64_t *make_orders(void) {
  int64_t *order = malloc(sizeof(int64_t) * (size_t)ROWS * 4);
  int64_t i, k;
  if (!order) {
    fprintf(stderr, "loader_bench: out of memory\n");
    exit(1);
  }
  for (k = 0; k < 4; ++k) {
    int64_t *o = order + k * ROWS;
    for (i = 0; i < ROWS; ++i) o[i] = i;
    for (i = ROWS - 1; i > 0; --i) {
      const int64_t j = (int64_t)(rng_next() % (uint64_t)(i + 1)), t = o[i];
      o[i] = o[j];
      o[j] = t;
    }
  }
  return order;
}

/* Moves epochs' worth of the loader's batches (64 rows, the last one 32) out of src_x/src_y with memcpy:
 * as contiguous blocks (plain), or row by row in a shuffled order (gather, what a shuffled loader must do).
 * Returns the seconds taken. */
static double copy_epochs(int epochs, int gather, const char *src_x, const int64_t *src_y, char *dst_x,
                          char *dst_y, const int64_t *order) {
  const size_t row_bytes = COLS * sizeof(float);
  double touched = 0, start = now_s();
  int epoch;
  int64_t b, i;
  for (epoch = 0; epoch < epochs; ++epoch) {
    for (b = 0; b < batches_per_epoch; ++b) {
      const int64_t first = b * BATCH;
      const int64_t n = first + BATCH <= ROWS ? BATCH : ROWS - first;
      if (gather) {
        const int64_t *rows = order + (size_t)(epoch % 4) * ROWS + first;
        for (i = 0; i < n; ++i) {
          memcpy(dst_x + (size_t)i * row_bytes, src_x + (size_t)rows[i] * row_bytes, row_bytes);
          memcpy(dst_y + (size_t)i * sizeof(int64_t), src_y + rows[i], sizeof(int64_t));
        }
      } else {
        memcpy(dst_x, src_x + (size_t)first * row_bytes, (size_t)n * row_bytes);
        memcpy(dst_y, src_y + first, (size_t)n * sizeof(int64_t));
      }
      touched += ((const float *)dst_x)[0] + (double)((const int64_t *)dst_y)[0];
    }
  }
  sink = touched;
  return now_s() - start;
}

static char *dst_x, *dst_y;

static void make_destination(void) {
  dst_x = malloc((size_t)BATCH * COLS * sizeof(float));
  dst_y = malloc((size_t)BATCH * sizeof(int64_t));
  if (!dst_x || !dst_y) {
    fprintf(stderr, "loader_bench: out of memory\n");
    exit(1);
  }
}

static int run_memcpy(int epochs, int warmup) {
  const double bytes = batch_bytes(ROWS) * epochs;
  const int64_t batches = (int64_t)epochs * batches_per_epoch;
  int64_t *order = make_orders();
  double plain, gather;
  make_destination();
  copy_epochs(warmup, 0, (const char *)x_data, y_data, dst_x, dst_y, order);
  plain = copy_epochs(epochs, 0, (const char *)x_data, y_data, dst_x, dst_y, order);
  copy_epochs(warmup, 1, (const char *)x_data, y_data, dst_x, dst_y, order);
  gather = copy_epochs(epochs, 1, (const char *)x_data, y_data, dst_x, dst_y, order);
  printf("memcpy epochs=%d batches=%lld seconds=%.4f batches_per_s=%.1f bytes_per_s=%.4g us_per_batch=%.2f "
         "gather_seconds=%.4f gather_bytes_per_s=%.4g gather_us_per_batch=%.2f\n",
         epochs, (long long)batches, plain, (double)batches / plain, bytes / plain, plain / batches * 1e6, gather,
         bytes / gather, gather / batches * 1e6);
  free(order);
  return 0;
}

static int run_accel(int epochs, int warmup) {
  accel_tensor_t *x = NULL, *y = NULL;
  accel_tensor_t *fields[2];
  const char *names[2] = {"x", "y"};
  accel_dataset_t *dataset = NULL;
  accel_state_t *state = NULL;
  accel_options_t *options = NULL;
  accel_loader_t *loader = NULL;
  int64_t x_shape[2] = {ROWS, COLS}, y_shape[1] = {ROWS};
  int64_t batches = 0, samples = 0;
  double t_next = 0, t_get = 0, t_free = 0, start, total, touched = 0;
  long faults = 0;
  int epoch;
  void *dataset_x, *dataset_y;
  int64_t *order;
  double gather;

  check(accel_tensor_from_buffer(&x, x_data, ACCEL_DTYPE_FLOAT32, x_shape, 2), "accel_tensor_from_buffer(x)");
  check(accel_tensor_from_buffer(&y, y_data, ACCEL_DTYPE_INT64, y_shape, 1), "accel_tensor_from_buffer(y)");
  fields[0] = x;
  fields[1] = y;
  check(accel_dataset_from_tensors(&dataset, names, fields, 2), "accel_dataset_from_tensors");
  /* The dataset shares these tensors: their memory is the data the loader gathers from. */
  check(accel_tensor_data(x, &dataset_x), "accel_tensor_data(dataset x)");
  check(accel_tensor_data(y, &dataset_y), "accel_tensor_data(dataset y)");
  check(accel_state_new(&state, NULL), "accel_state_new");
  check(accel_options_new(&options), "accel_options_new");
  check(accel_options_set_int(options, "batch_size", BATCH), "set batch_size");
  check(accel_options_set_bool(options, "shuffle", 1), "set shuffle");
  check(accel_options_set_int(options, "data_seed", DATA_SEED), "set data_seed");
  check(accel_loader_new(&loader, state, dataset, options), "accel_loader_new");
  accel_options_free(options);
  int64_t length = 0;
  check(accel_loader_length(loader, &length), "accel_loader_length");
  if (length != batches_per_epoch) {
    fprintf(stderr, "loader_bench: loader length %lld, expected %lld\n", (long long)length,
            (long long)batches_per_epoch);
    return 1;
  }

  start = now_s();
  for (epoch = 0; epoch < warmup + epochs; ++epoch) {
    if (epoch == warmup) {
      faults = minor_faults();
      start = now_s();
      batches = samples = 0;
      t_next = t_get = t_free = 0;
    }
    for (;;) {
      accel_batch_t *batch = NULL;
      accel_tensor_t *bx = NULL, *by = NULL;
      void *px, *py;
      double t0 = now_s(), t1, t2, t3;
      check(accel_loader_next(loader, &batch), "accel_loader_next");
      t1 = now_s();
      t_next += t1 - t0;
      if (!batch) break;
      check(accel_batch_get(batch, "x", &bx), "accel_batch_get(x)");
      check(accel_batch_get(batch, "y", &by), "accel_batch_get(y)");
      check(accel_tensor_data(bx, &px), "accel_tensor_data(x)");
      check(accel_tensor_data(by, &py), "accel_tensor_data(y)");
      touched += ((const float *)px)[0] + (double)((const int64_t *)py)[0];
      samples += accel_tensor_shape(bx)[0];
      t2 = now_s();
      accel_tensor_free(bx);
      accel_tensor_free(by);
      accel_batch_free(batch);
      t3 = now_s();
      t_get += t2 - t1;
      t_free += t3 - t2;
      ++batches;
    }
  }
  total = now_s() - start;
  faults = minor_faults() - faults;
  sink = touched;

  /* Informational: the bare gather of the same batches' bytes from the very memory the loader reads
   * (row by row in shuffled orders, memcpy): the floor for any shuffled loader in this process. */
  order = make_orders();
  make_destination();
  copy_epochs(warmup, 1, dataset_x, dataset_y, dst_x, dst_y, order);
  gather = copy_epochs(epochs, 1, dataset_x, dataset_y, dst_x, dst_y, order);
  free(order);

  accel_loader_free(loader);
  accel_dataset_free(dataset);
  accel_tensor_free(x);
  accel_tensor_free(y);
  accel_state_free(state);

  /* Each epoch must hold every sample; the last batch may be padded to a full one (even_batches). */
  if (batches != (int64_t)epochs * batches_per_epoch || samples < (int64_t)epochs * ROWS) {
    fprintf(stderr, "loader_bench: got %lld batches / %lld samples, expected %lld / at least %lld\n",
            (long long)batches, (long long)samples, (long long)epochs * batches_per_epoch, (long long)epochs * ROWS);
    return 1;
  }
  printf("accel epochs=%d batches=%lld samples_per_epoch=%lld seconds=%.4f batches_per_s=%.1f bytes_per_s=%.4g "
         "us_per_batch=%.2f next_us=%.2f get_touch_us=%.2f free_us=%.2f page_faults_per_batch=%.1f "
         "same_buffer_gather_us_per_batch=%.2f\n",
         epochs, (long long)batches, (long long)(samples / epochs), total, (double)batches / total,
         batch_bytes(samples) / total, total / batches * 1e6, t_next / batches * 1e6, t_get / batches * 1e6,
         t_free / batches * 1e6, (double)faults / batches, gather / batches * 1e6);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  const int epochs = argc > 2 ? atoi(argv[2]) : 3;
  const int warmup = argc > 3 ? atoi(argv[3]) : 1;
  if (epochs < 1 || warmup < 0 || (strcmp(mode, "accel") != 0 && strcmp(mode, "memcpy") != 0)) {
    fprintf(stderr, "usage: loader_bench accel|memcpy [epochs >= 1] [warmup_epochs >= 0]\n");
    return 2;
  }
  make_data();
  return strcmp(mode, "accel") == 0 ? run_accel(epochs, warmup) : run_memcpy(epochs, warmup);
}
