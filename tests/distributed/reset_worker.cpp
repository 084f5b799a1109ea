// accel_state_reset (Accelerate's AcceleratorState._reset_state) on every rank under `accel launch`, 1 or
// 2 processes: after a reset the next state may choose other settings, the old handle's calls fail naming
// the reset, a new state asking for the same process group takes it over, one asking for another (a
// different timeout) gets a new one; project settings and the checkpoint iteration belong to each handle.
// Exit code 0 means every expectation held on that rank.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "accel.h"

namespace {

int failures = 0;

void expect(bool condition, const std::string& what) {
  if (!condition) {
    std::fprintf(stderr, "FAILED: %s (last error: %s)\n", what.c_str(), accel_error_last());
    ++failures;
  }
}

accel_state_t* make_state(const std::vector<std::pair<std::string, std::string>>& settings) {
  accel_options_t* options = nullptr;
  accel_state_t* state = nullptr;
  expect(accel_options_new(&options) == ACCEL_OK, "options");
  for (const auto& [key, value] : settings) {
    expect(accel_options_set(options, key.c_str(), value.c_str()) == ACCEL_OK, "set " + key);
  }
  const int code = accel_state_new(&state, options);
  expect(code == ACCEL_OK, "a state with the settings asked for");
  accel_options_free(options);
  return state;
}

// Every rank's rank, gathered: the group works and is this job's.
void expect_group_works(accel_state_t* state, const std::string& when) {
  const int64_t shape[] = {1};
  const float mine = static_cast<float>(accel_state_process_index(state));
  accel_tensor_t* input = nullptr;
  accel_tensor_t* all = nullptr;
  expect(accel_tensor_from_buffer(&input, &mine, ACCEL_DTYPE_FLOAT32, shape, 1) == ACCEL_OK, "input");
  expect(accel_state_gather(state, input, &all) == ACCEL_OK, "gather " + when);
  expect(accel_tensor_numel(all) == accel_state_num_processes(state), "one row per process " + when);
  accel_tensor_free(all);
  accel_tensor_free(input);
}

}  // namespace

int main() {
  accel_state_t* first = make_state({{"mixed_precision", "no"}, {"project_dir", "/tmp/accel-reset-a"}});
  expect_group_works(first, "before the reset");
  // A second handle of the same state may name another project; other settings must agree.
  accel_state_t* other_project = make_state({{"project_dir", "/tmp/accel-reset-b"}, {"total_limit", "3"}});
  expect(accel_state_set_checkpoint_iteration(other_project, 7) == ACCEL_OK, "set the iteration");
  expect(accel_state_checkpoint_iteration(other_project) == 7 && accel_state_checkpoint_iteration(first) == 0,
         "each handle has its own checkpoint iteration");
  expect(accel_state_set_checkpoint_iteration(first, -1) == ACCEL_ERR_INVALID_ARGUMENT, "a negative iteration is refused");
  accel_options_t* bf16 = nullptr;
  accel_state_t* refused = nullptr;
  expect(accel_options_new(&bf16) == ACCEL_OK && accel_options_set(bf16, "mixed_precision", "bf16") == ACCEL_OK,
         "bf16 options");
  expect(accel_state_new(&refused, bf16) == ACCEL_ERR_INVALID_STATE, "another mixed precision is refused before a reset");

  expect(accel_state_reset(first) == ACCEL_OK, "reset");
  expect(accel_state_wait_for_everyone(first) == ACCEL_ERR_INVALID_STATE &&
             std::string(accel_error_last()).find("the state was reset") != std::string::npos,
         "the old handle's collective fails naming the reset");
  expect(accel_state_reset(other_project) == ACCEL_OK, "a second reset of the retired state does nothing");

  accel_state_t* second = nullptr;
  expect(accel_state_new(&second, bf16) == ACCEL_OK, "after the reset another mixed precision is taken");
  expect(std::string(accel_state_mixed_precision(second)) == "bf16", "the new state has bf16");
  expect_group_works(second, "in the state that took the group over");
  accel_options_free(bf16);

  expect(accel_state_reset(second) == ACCEL_OK, "second reset");
  accel_state_t* third = make_state({{"timeout_s", "600"}});
  expect_group_works(third, "in a state with a group of its own (another timeout)");
  expect(accel_state_shutdown(third) == ACCEL_OK, "shutdown");

  for (accel_state_t* state : {first, other_project, second, third}) accel_state_free(state);
  if (failures == 0) std::printf("reset: ok on rank %s\n", std::getenv("RANK") ? std::getenv("RANK") : "0");
  return failures == 0 ? 0 : 1;
}
