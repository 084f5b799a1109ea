// Runs under `accel launch` (tests/distributed/shm_test.sh). Mode (argv[1]):
//   reduce DIR  all-reduces seeded random tensors (float32 sum, large enough to make the segment grow;
//               float64 sum; float32 max; float16 sum) and rank 0 writes each result's bytes to DIR/<case>.bin,
//               for the script to compare between transports; then checks that a reduce-scatter is its
//               rank's slice of the all-reduce bit for bit, and an all-gather every rank's tensor.
//   kill [R]    one all-reduce, then rank R (default 1) is SIGKILLed while the others start the next: each
//               of them must fail with ACCEL_ERR_PEER_FAILED (or be stopped by its launcher).
//   stall R S   one all-reduce, then rank R sleeps S seconds (past the timeout) and leaves while the others
//               start the next: each of them must fail with ACCEL_ERR_TIMEOUT.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "accel.h"

namespace {

accel_state_t* state = nullptr;

template <class T>
std::vector<T> random_values(size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  // Magnitudes over several binades, so that the rounding of each sum matters.
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<T> values(count);
  for (auto& value : values) value = static_cast<T>(std::ldexp(mantissa(generator), exponent(generator)));
  return values;
}

bool reduce_case(const std::string& dir, const char* name, int32_t dtype, const void* data, size_t count,
                 size_t element_size, const char* reduction) {
  const int64_t shape[] = {static_cast<int64_t>(count)};
  accel_tensor_t *input = nullptr, *out = nullptr;
  if (accel_tensor_from_buffer(&input, data, dtype, shape, 1) != ACCEL_OK ||
      accel_state_reduce(state, input, reduction, &out) != ACCEL_OK) {
    std::fprintf(stderr, "%s: %s\n", name, accel_error_last());
    return false;
  }
  std::vector<char> bytes(count * element_size);
  const bool ok = accel_tensor_copy_to_buffer(out, bytes.data(), bytes.size()) == ACCEL_OK;
  if (ok && accel_state_process_index(state) == 0) {
    FILE* file = std::fopen((dir + "/" + name + ".bin").c_str(), "wb");
    if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) return false;
    std::fclose(file);
  }
  accel_tensor_free(out);
  accel_tensor_free(input);
  return ok;
}

// The reduce-scatter gives, bit for bit, this rank's slice of the all-reduce of the same tensors (the same
// sums in the same order, whichever the transport), and the all-gather every rank's tensor in rank order.
bool scatter_and_gather() {
  const int world = accel_state_num_processes(state), rank = accel_state_process_index(state);
  const int64_t n = 400'003;  // per rank: the segment grows past its first size; the slices split unevenly
  const auto mine = random_values<float>(static_cast<size_t>(world * n), 2000u + static_cast<unsigned>(rank));
  const int64_t whole[] = {world * n}, share[] = {n};
  accel_tensor_t *input = nullptr, *reduced = nullptr, *scattered = nullptr, *gathered = nullptr;
  std::vector<float> zeros(static_cast<size_t>(world * n));
  bool ok = accel_tensor_from_buffer(&input, mine.data(), ACCEL_DTYPE_FLOAT32, whole, 1) == ACCEL_OK &&
            accel_tensor_from_buffer(&scattered, zeros.data(), ACCEL_DTYPE_FLOAT32, share, 1) == ACCEL_OK &&
            accel_state_reduce(state, input, "sum", &reduced) == ACCEL_OK &&
            accel_state_reduce_scatter(state, input, "sum", scattered) == ACCEL_OK;
  if (!ok) std::fprintf(stderr, "reduce_scatter: %s\n", accel_error_last());
  std::vector<float> all(static_cast<size_t>(world * n)), slice(static_cast<size_t>(n));
  if (ok) {
    ok = accel_tensor_copy_to_buffer(reduced, all.data(), all.size() * sizeof(float)) == ACCEL_OK &&
         accel_tensor_copy_to_buffer(scattered, slice.data(), slice.size() * sizeof(float)) == ACCEL_OK;
    if (ok && std::memcmp(slice.data(), all.data() + rank * n, slice.size() * sizeof(float)) != 0) {
      std::fprintf(stderr, "rank %d: the reduce-scatter differs from its slice of the all-reduce\n", rank);
      ok = false;
    }
  }
  // Every rank's first n elements, gathered.
  const int64_t gathered_shape[] = {world, n};
  accel_tensor_t* first = nullptr;
  ok = ok && accel_tensor_from_buffer(&first, mine.data(), ACCEL_DTYPE_FLOAT32, share, 1) == ACCEL_OK &&
       accel_tensor_from_buffer(&gathered, zeros.data(), ACCEL_DTYPE_FLOAT32, gathered_shape, 2) == ACCEL_OK;
  if (ok && accel_state_all_gather(state, first, gathered) != ACCEL_OK) {
    std::fprintf(stderr, "all_gather: %s\n", accel_error_last());
    ok = false;
  }
  if (ok) ok = accel_tensor_copy_to_buffer(gathered, all.data(), all.size() * sizeof(float)) == ACCEL_OK;
  for (int r = 0; ok && r < world; ++r) {
    const auto theirs = random_values<float>(static_cast<size_t>(world * n), 2000u + static_cast<unsigned>(r));
    if (std::memcmp(all.data() + r * n, theirs.data(), static_cast<size_t>(n) * sizeof(float)) != 0) {
      std::fprintf(stderr, "rank %d: the all-gather's part of rank %d differs from its tensor\n", rank, r);
      ok = false;
    }
  }
  for (auto* tensor : {input, reduced, scattered, gathered, first}) accel_tensor_free(tensor);
  return ok;
}

int reduce_all(const std::string& dir) {
  const unsigned seed = 1000u + static_cast<unsigned>(accel_state_process_index(state));
  const auto floats = random_values<float>(3'000'001, seed);
  const auto doubles = random_values<double>(100'003, seed);
  // float16 bit patterns: random sign and mantissa, exponents around 1.
  std::mt19937 generator(seed);
  std::vector<uint16_t> halves(50'001);
  for (auto& half : halves) {
    const uint32_t bits = generator();
    half = static_cast<uint16_t>((bits & 0x8000u) | ((8u + (bits >> 16) % 14u) << 10) | (bits & 0x3ffu));
  }
  const bool ok = reduce_case(dir, "float32_sum", ACCEL_DTYPE_FLOAT32, floats.data(), floats.size(), 4, "sum") &&
                  reduce_case(dir, "float64_sum", ACCEL_DTYPE_FLOAT64, doubles.data(), doubles.size(), 8, "sum") &&
                  reduce_case(dir, "float32_max", ACCEL_DTYPE_FLOAT32, floats.data(), 1001, 4, "max") &&
                  reduce_case(dir, "float16_sum", ACCEL_DTYPE_FLOAT16, halves.data(), halves.size(), 2, "sum");
  return ok && scatter_and_gather() ? 0 : 1;
}

// One all-reduce, then `victim` does what `fail` does while the others start the next, which must fail with
// `expected` (described as `happened` in what they print).
int failed_rank(int victim, void (*fail)(), const char* happened, int expected) {
  const float value = 1.0f;
  const int64_t shape[] = {1};
  accel_tensor_t *input = nullptr, *out = nullptr;
  if (accel_tensor_from_buffer(&input, &value, ACCEL_DTYPE_FLOAT32, shape, 1) != ACCEL_OK ||
      accel_state_reduce(state, input, "sum", &out) != ACCEL_OK) {
    return 1;
  }
  accel_tensor_free(out);
  const int rank = accel_state_process_index(state);
  if (rank == victim) fail();
  const int code = accel_state_reduce(state, input, "sum", &out);
  // One write for the whole message: the ranks of a node share one log, and hier_test.sh greps each
  // rank's line, which stdio may split into several writes that another rank's interleave.
  const std::string line = "rank " + std::to_string(rank) + " after rank " + std::to_string(victim) + " " + happened +
                           ": " + accel_error_name(code) + ": " + accel_error_last() + "\n";
  if (write(STDERR_FILENO, line.data(), line.size()) < 0) return 1;
  return code == expected ? 0 : 1;
}

int stall_seconds = 0;

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (accel_state_new(&state, nullptr) != ACCEL_OK) {
    std::fprintf(stderr, "accel_state_new: %s\n", accel_error_last());
    return 1;
  }
  std::fprintf(stderr, "rank %d: backend %s\n", accel_state_process_index(state), accel_state_backend(state));
  int result = 2;
  if (mode == "reduce" && argc > 2) result = reduce_all(argv[2]);
  if (mode == "kill") {
    const int victim = argc > 2 ? std::atoi(argv[2]) : 1;
    result = failed_rank(victim, [] { raise(SIGKILL); }, "was killed", ACCEL_ERR_PEER_FAILED);
  }
  if (mode == "stall" && argc > 3) {
    stall_seconds = std::atoi(argv[3]);
    // The sleeper leaves without a word: the others' group is broken by then.
    result = failed_rank(std::atoi(argv[2]), [] { sleep(static_cast<unsigned>(stall_seconds)); _exit(0); }, "stalled",
                         ACCEL_ERR_TIMEOUT);
  }
  if (result == 0 && accel_state_shutdown(state) != ACCEL_OK) result = 1;
  accel_state_free(state);
  return result;
}
