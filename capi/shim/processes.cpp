#include "accel/processes.h"

#include "distributed/processes.hpp"
#include "shim/entry_point.hpp"

extern "C" int accel_state_split_range(const accel_state_t* state, int64_t length, int64_t* first, int64_t* count,
                                       int64_t* padded_count) {
  return guarded(__func__, [&] {
    require(state, "state");
    const auto& launch = state->accelerator->state()->launch();
    const auto share = accel::distributed::share_of(length, launch.rank, launch.world_size);
    if (first != nullptr) *first = share.first;
    if (count != nullptr) *count = share.count;
    if (padded_count != nullptr) *padded_count = share.padded_count;
  });
}

extern "C" int accel_state_split_tensor(const accel_state_t* state, const accel_tensor_t* input, int apply_padding,
                                        accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    require(input, "input");
    *out = new accel_tensor(accel::distributed::split_rows(*state->accelerator->state(), input->tensor, accel::capi::flag(apply_padding, "apply_padding")));
  });
}

extern "C" int accel_state_main_process_first_begin(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    accel::distributed::goes_first_begin(*state->accelerator->state(), /*local=*/false);
  });
}

extern "C" int accel_state_main_process_first_end(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    accel::distributed::goes_first_end(*state->accelerator->state(), /*local=*/false);
  });
}

extern "C" int accel_state_local_main_process_first_begin(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    accel::distributed::goes_first_begin(*state->accelerator->state(), /*local=*/true);
  });
}

extern "C" int accel_state_local_main_process_first_end(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    accel::distributed::goes_first_end(*state->accelerator->state(), /*local=*/true);
  });
}

extern "C" int accel_state_send_to_device(const accel_state_t* state, const accel_tensor_t* input, int non_blocking,
                                          accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    require(input, "input");
    *out = new accel_tensor(accel::distributed::send_to_device(*state->accelerator->state(), input->tensor, accel::capi::flag(non_blocking, "non_blocking")));
  });
}
