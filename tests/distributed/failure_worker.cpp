// Failure scenarios, run under `accel launch` on 2 processes. Mode (argv[1]):
//   collective-timeout  rank 1 never joins a gather: rank 0 must get ACCEL_ERR_TIMEOUT within the timeout,
//                       then ACCEL_ERR_INVALID_STATE at once for the next collective.
//   rendezvous-timeout  rank 1 never creates its state: rank 0's accel_state_new must time out.
//   peer-exit           rank 1 exits (code 0) without shutdown: rank 0's gather must fail, not hang.
// Exit code 0 means the expectation held on that rank.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "accel.h"

namespace {

constexpr double kTimeoutS = 3.0;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

accel_state_t* new_state() {
  accel_options_t* options = nullptr;
  accel_state_t* state = nullptr;
  if (accel_options_new(&options) != ACCEL_OK || accel_options_set_double(options, "timeout_s", kTimeoutS) != ACCEL_OK) {
    std::fprintf(stderr, "options: %s\n", accel_error_last());
    return nullptr;
  }
  const int code = accel_state_new(&state, options);
  accel_options_free(options);
  if (code != ACCEL_OK) std::fprintf(stderr, "accel_state_new: %s: %s\n", accel_error_name(code), accel_error_last());
  return state;
}

int expect(bool condition, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", condition ? "ok" : "FAILED", what.c_str());
  return condition ? 0 : 1;
}

int gather_once(accel_state_t* state, double* elapsed) {
  const float value = 1.0f;
  const int64_t shape[] = {1};
  accel_tensor_t *input = nullptr, *out = nullptr;
  if (accel_tensor_from_buffer(&input, &value, ACCEL_DTYPE_FLOAT32, shape, 1) != ACCEL_OK) return ACCEL_ERR_INTERNAL;
  const auto start = std::chrono::steady_clock::now();
  const int code = accel_state_gather(state, input, &out);
  *elapsed = seconds_since(start);
  accel_tensor_free(out);
  accel_tensor_free(input);
  return code;
}

int collective_timeout(int rank) {
  accel_state_t* state = new_state();
  if (state == nullptr) return 1;
  if (rank == 1) {
    sleep(static_cast<unsigned>(kTimeoutS * 3));
    accel_state_free(state);
    return 0;
  }
  double elapsed = 0;
  int code = gather_once(state, &elapsed);
  std::fprintf(stderr, "rank 0 gather: %s after %.1f s: %s\n", accel_error_name(code), elapsed, accel_error_last());
  int failures = expect(code == ACCEL_ERR_TIMEOUT, "gather times out");
  failures += expect(elapsed < kTimeoutS + 2.0, "within the timeout");
  failures += expect(std::strstr(accel_error_last(), "timed out") != nullptr, "the message says it timed out");
  failures += expect(accel_state_is_broken(state) == 1, "the state reports a broken group");
  code = gather_once(state, &elapsed);
  failures += expect(code == ACCEL_ERR_INVALID_STATE && elapsed < 1.0, "the next collective fails at once");
  accel_state_free(state);
  return failures;
}

int rendezvous_timeout(int rank) {
  if (rank == 1) {
    sleep(static_cast<unsigned>(kTimeoutS * 3));
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  accel_state_t* state = new_state();
  const double elapsed = seconds_since(start);
  int failures = expect(state == nullptr, "accel_state_new fails");
  failures += expect(std::strstr(accel_error_last(), "rendezvous") != nullptr, "the message names the rendezvous");
  failures += expect(elapsed < kTimeoutS + 3.0, "within the timeout");
  accel_state_free(state);
  return failures;
}

int peer_exit(int rank) {
  accel_state_t* state = new_state();
  if (state == nullptr) return 1;
  if (accel_state_wait_for_everyone(state) != ACCEL_OK) return 1;
  if (rank == 1) _exit(0);
  sleep(1);
  double elapsed = 0;
  const int code = gather_once(state, &elapsed);
  std::fprintf(stderr, "rank 0 gather: %s after %.1f s: %s\n", accel_error_name(code), elapsed, accel_error_last());
  int failures = expect(code == ACCEL_ERR_PEER_FAILED || code == ACCEL_ERR_TIMEOUT, "gather fails");
  failures += expect(elapsed < kTimeoutS + 2.0, "without hanging");
  accel_state_free(state);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank_text = std::getenv("RANK");
  const int rank = rank_text ? std::atoi(rank_text) : 0;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "collective-timeout") return collective_timeout(rank);
  if (mode == "rendezvous-timeout") return rendezvous_timeout(rank);
  if (mode == "peer-exit") return peer_exit(rank);
  std::fprintf(stderr, "usage: failure_worker collective-timeout|rendezvous-timeout|peer-exit\n");
  return 2;
}
