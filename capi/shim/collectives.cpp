#include "accel/collectives.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "distributed/collectives/collectives.hpp"
#include "distributed/collectives/sharded_collectives.hpp"
#include "shim/entry_point.hpp"

extern "C" int accel_state_gather(accel_state_t* state, const accel_tensor_t* input, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    require(input, "input");
    *out = new accel_tensor(accel::distributed::gather(*state->accelerator->state(), input->tensor));
  });
}

extern "C" int accel_state_gather_bytes(accel_state_t* state, const void* data, size_t size, accel_bytes_list_t** out) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    if (size > 0) require(data, "data");
    const std::string bytes = size > 0 ? std::string(static_cast<const char*>(data), size) : std::string();
    *out = new accel_bytes_list{{}, accel::distributed::gather_bytes(*state->accelerator->state(), bytes)};
  });
}

extern "C" size_t accel_bytes_list_count(const accel_bytes_list_t* list) {
  return read_handle<size_t>(__func__, list, 0, [&](const auto&) { return list->entries.size(); });
}

extern "C" int accel_bytes_list_get(const accel_bytes_list_t* list, size_t index, const void** data, size_t* size) {
  return guarded(__func__, [&] {
    require(list, "list");
    require(data, "data");
    require(size, "size");
    if (index >= list->entries.size()) {
      accel::fail(accel::Code::OutOfRange, "index " + std::to_string(index) + " is outside [0, " +
                                               std::to_string(list->entries.size()) + ")");
    }
    *data = list->entries[index].data();
    *size = list->entries[index].size();
  });
}

extern "C" void accel_bytes_list_free(accel_bytes_list_t* list) { release(__func__, list); }

extern "C" int accel_state_reduce(accel_state_t* state, const accel_tensor_t* input, const char* reduction,
                                  accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    require(input, "input");
    require(reduction, "reduction");
    *out = new accel_tensor(accel::distributed::reduce(*state->accelerator->state(), input->tensor, reduction));
  });
}

extern "C" int accel_state_reduce_named(accel_state_t* state, const char* const* names, accel_tensor_t* const* inputs,
                                        size_t count, const char* reduction, accel_tensor_t** outputs) {
  return guarded(__func__, [&] {
    // As guarded_out does for one out-parameter: nothing is left in outputs unless the call succeeds.
    if (outputs != nullptr) std::fill(outputs, outputs + count, nullptr);
    require(state, "state");
    require(reduction, "reduction");
    require(outputs, "outputs");
    auto reduced =
        accel::distributed::reduce(*state->accelerator->state(), accel::capi::named_tensors(names, inputs, count, "inputs"), reduction);
    std::vector<std::unique_ptr<accel_tensor>> made;
    for (auto& leaf : reduced) made.push_back(std::make_unique<accel_tensor>(std::move(leaf.second)));
    for (size_t i = 0; i < count; ++i) outputs[i] = made[i].release();
  });
}

extern "C" int accel_state_broadcast(accel_state_t* state, accel_tensor_t* tensor, int32_t from_process) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(tensor, "tensor");
    accel::distributed::broadcast(*state->accelerator->state(), tensor->tensor, from_process);
  });
}

extern "C" int accel_state_reduce_scatter(accel_state_t* state, const accel_tensor_t* input, const char* reduction,
                                          accel_tensor_t* output) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(input, "input");
    require(reduction, "reduction");
    require(output, "output");
    accel::distributed::reduce_scatter(*state->accelerator->state(), input->tensor, output->tensor, reduction);
  });
}

extern "C" int accel_state_all_gather(accel_state_t* state, const accel_tensor_t* input, accel_tensor_t* output) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(input, "input");
    require(output, "output");
    accel::distributed::all_gather(*state->accelerator->state(), input->tensor, output->tensor);
  });
}

extern "C" int accel_state_pad_across_processes(accel_state_t* state, const accel_tensor_t* input, int64_t dim,
                                                double pad_value, int pad_first, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    require(input, "input");
    *out = new accel_tensor(
        accel::distributed::pad_across_processes(*state->accelerator->state(), input->tensor, dim, pad_value, accel::capi::flag(pad_first, "pad_first")));
  });
}

extern "C" int accel_state_gather_for_metrics(accel_state_t* state, const accel_tensor_t* input, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    require(input, "input");
    *out = new accel_tensor(accel::distributed::gather_for_metrics(*state->accelerator->state(), input->tensor));
  });
}
