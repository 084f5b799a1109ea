#include "accel/state.h"

#include "core/env.hpp"
#include "shim/guard.hpp"
#include "shim/handles.hpp"

using accel::capi::guarded;
using accel::capi::guarded_out;
using accel::capi::require;

extern "C" int accel_state_new(accel_state_t** out, const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    auto state = accel::dist::State::acquire(options ? &options->options : nullptr, accel::process_env());
    *out = new accel_state{std::move(state)};
  });
}

extern "C" void accel_state_free(accel_state_t* state) { delete state; }

extern "C" int accel_state_shutdown(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->state->shutdown();
  });
}

extern "C" int accel_state_wait_for_everyone(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->state->wait_for_everyone();
  });
}

extern "C" int32_t accel_state_num_processes(const accel_state_t* state) {
  return state ? state->state->launch().world_size : 0;
}
extern "C" int32_t accel_state_process_index(const accel_state_t* state) {
  return state ? state->state->launch().rank : 0;
}
extern "C" int32_t accel_state_local_process_index(const accel_state_t* state) {
  return state ? state->state->launch().local_rank : 0;
}
extern "C" int32_t accel_state_num_local_processes(const accel_state_t* state) {
  return state ? state->state->launch().local_world_size : 0;
}
extern "C" int accel_state_is_main_process(const accel_state_t* state) {
  return state && state->state->launch().rank == 0;
}
extern "C" int accel_state_is_local_main_process(const accel_state_t* state) {
  return state && state->state->launch().local_rank == 0;
}
extern "C" int accel_state_is_last_process(const accel_state_t* state) {
  return state && state->state->launch().rank == state->state->launch().world_size - 1;
}
extern "C" int accel_state_distributed_type(const accel_state_t* state) {
  return state ? static_cast<int>(state->state->distributed_type()) : ACCEL_DISTRIBUTED_NO;
}
extern "C" const char* accel_state_distributed_type_name(const accel_state_t* state) {
  return accel::dist::distributed_type_name(state ? state->state->distributed_type() : accel::dist::DistributedType::No);
}
extern "C" const char* accel_state_device(const accel_state_t* state) {
  return state ? state->state->device().c_str() : "";
}
extern "C" const char* accel_state_mixed_precision(const accel_state_t* state) {
  return state ? state->state->options().get_string("mixed_precision").c_str() : "";
}
extern "C" const char* accel_state_backend(const accel_state_t* state) {
  return state ? state->state->backend().c_str() : "";
}
extern "C" int accel_state_is_broken(const accel_state_t* state) { return state && state->state->broken(); }
