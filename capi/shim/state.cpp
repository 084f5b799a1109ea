#include "accel/state.h"

#include "core/env.hpp"
#include "distributed/collectives/seed.hpp"
#include "shim/entry_point.hpp"

extern "C" int accel_state_new(accel_state_t** out, const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    *out = new accel_state{{}, std::make_shared<accel::Accelerator>(settings_of(options), accel::process_env())};
  });
}

extern "C" void accel_state_free(accel_state_t* state) { release(__func__, state); }

extern "C" int accel_state_shutdown(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->shutdown();
  });
}

extern "C" int accel_state_reset(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->wait_for_save();
    accel::distributed::State::reset(state->accelerator->state());
  });
}

extern "C" int accel_state_wait_for_everyone(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->state()->wait_for_everyone();
  });
}

extern "C" int accel_state_set_seed(accel_state_t* state, uint64_t seed, int device_specific) {
  return guarded(__func__, [&] {
    require(state, "state");
    accel::distributed::set_seed(*state->accelerator->state(), seed, accel::capi::flag(device_specific, "device_specific"));
  });
}

extern "C" int32_t accel_state_num_processes(const accel_state_t* state) {
  return read_handle<int32_t>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->state()->launch().world_size; });
}
extern "C" int32_t accel_state_process_index(const accel_state_t* state) {
  return read_handle<int32_t>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->state()->launch().rank; });
}
extern "C" int32_t accel_state_local_process_index(const accel_state_t* state) {
  return read_handle<int32_t>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->state()->launch().local_rank; });
}
extern "C" int32_t accel_state_num_local_processes(const accel_state_t* state) {
  return read_handle<int32_t>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->state()->launch().local_world_size; });
}
extern "C" int accel_state_is_main_process(const accel_state_t* state) {
  return read_handle<int>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->state()->launch().rank == 0; });
}
extern "C" int accel_state_is_local_main_process(const accel_state_t* state) {
  return read_handle<int>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->state()->launch().local_rank == 0; });
}
extern "C" int accel_state_is_last_process(const accel_state_t* state) {
  return read_handle<int>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->state()->launch().rank == s.accelerator->state()->launch().world_size - 1; });
}
extern "C" int accel_state_distributed_type(const accel_state_t* state) {
  return read_handle<int>(__func__, state, ACCEL_DISTRIBUTED_NO, [](const accel_state& s) { return static_cast<int>(s.accelerator->state()->distributed_type()); });
}
extern "C" const char* accel_state_distributed_type_name(const accel_state_t* state) {
  return read_handle<const char*>(__func__, state, "NO", [](const accel_state& s) { return accel::distributed::distributed_type_name(s.accelerator->state()->distributed_type()); });
}
extern "C" const char* accel_state_device(const accel_state_t* state) {
  return read_handle<const char*>(__func__, state, "", [](const accel_state& s) { return s.accelerator->state()->device().c_str(); });
}
extern "C" const char* accel_state_mixed_precision(const accel_state_t* state) {
  return read_handle<const char*>(__func__, state, "", [](const accel_state& s) { return s.accelerator->state()->options().get_string("mixed_precision").c_str(); });
}
extern "C" const char* accel_state_backend(const accel_state_t* state) {
  return read_handle<const char*>(__func__, state, "", [](const accel_state& s) { return s.accelerator->state()->backend_name().c_str(); });
}
extern "C" int accel_state_is_broken(const accel_state_t* state) {
  return read_handle<int>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->state()->broken(); });
}
