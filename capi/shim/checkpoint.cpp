#include "accel/checkpoint.h"

#include <optional>
#include <string>

#include "shim/entry_point.hpp"

namespace {

// The raw objects behind the handle arrays; every element must be a live handle.
template <typename Handle, typename Object, typename Member>
std::vector<Object*> objects_of(Handle* const* handles, size_t count, const char* what, Member member) {
  if (count > 0) require(handles, what);
  std::vector<Object*> objects;
  for (size_t i = 0; i < count; ++i) {
    require(handles[i], what);
    objects.push_back(&*(handles[i]->*member));
  }
  return objects;
}

accel::ckpt::CheckpointObjects checkpoint_objects(accel_model_t* const* models, size_t num_models,
                                                  accel_optimizer_t* const* optimizers, size_t num_optimizers,
                                                  accel_scheduler_t* const* schedulers, size_t num_schedulers,
                                                  accel_loader_t* const* loaders, size_t num_loaders) {
  accel::ckpt::CheckpointObjects objects{objects_of<accel_model_t, accel::train::Model>(models, num_models, "models", &accel_model::model),
          objects_of<accel_optimizer_t, accel::train::AcceleratedOptimizer>(optimizers, num_optimizers, "optimizers",
                                                                             &accel_optimizer::optimizer),
          objects_of<accel_scheduler_t, accel::train::AcceleratedScheduler>(schedulers, num_schedulers, "schedulers",
                                                                             &accel_scheduler::scheduler),
          objects_of<accel_loader_t, accel::data::Loader>(loaders, num_loaders, "loaders", &accel_loader::loader), {}};
  return objects;
}

std::optional<std::string> optional_directory(const char* directory) {
  return directory != nullptr ? std::optional<std::string>(directory) : std::nullopt;
}

// A registered object named `name` whose save is the caller's callback writing into a sink; its load is the
// caller's to set. The arguments both kinds of registration check.
accel::ckpt::CustomObject registered_object(const char* name, accel_save_object_fn save, const void* load, void* payload) {
  require(name, "name");
  require(reinterpret_cast<const void*>(save), "save");
  require(load, "load");
  accel::ckpt::CustomObject object;
  object.name = name;
  object.save = [object_name = object.name, save, payload] {
    accel_sink sink{};
    const int code = save(&sink, payload);
    if (code != 0) {
      accel::fail(accel::Code::Callback, "the save callback of the registered object '" + object_name + "' returned " + std::to_string(code));
    }
    return std::move(sink.bytes);
  };
  return object;
}

void check_loaded(const std::string& object_name, int code) {
  if (code != 0) {
    accel::fail(accel::Code::Callback, "the load callback of the registered object '" + object_name + "' returned " + std::to_string(code));
  }
}

}  // namespace

extern "C" int accel_state_save_state(accel_state_t* state, const char* directory, accel_model_t* const* models,
                                      size_t num_models, accel_optimizer_t* const* optimizers, size_t num_optimizers,
                                      accel_scheduler_t* const* schedulers, size_t num_schedulers,
                                      accel_loader_t* const* loaders, size_t num_loaders) {
  return guarded(__func__, [&] {
    require(state, "state");
    const auto objects = checkpoint_objects(models, num_models, optimizers, num_optimizers, schedulers,
                                            num_schedulers, loaders, num_loaders);
    state->accelerator->save_state(optional_directory(directory), objects);
  });
}

extern "C" int accel_state_save_state_async(accel_state_t* state, const char* directory, accel_model_t* const* models,
                                            size_t num_models, accel_optimizer_t* const* optimizers, size_t num_optimizers,
                                            accel_scheduler_t* const* schedulers, size_t num_schedulers,
                                            accel_loader_t* const* loaders, size_t num_loaders) {
  return guarded(__func__, [&] {
    require(state, "state");
    const auto objects = checkpoint_objects(models, num_models, optimizers, num_optimizers, schedulers,
                                            num_schedulers, loaders, num_loaders);
    state->accelerator->save_state_async(optional_directory(directory), objects);
  });
}

extern "C" int accel_state_wait_for_save(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->wait_for_save();
  });
}

extern "C" int64_t accel_state_checkpoint_iteration(const accel_state_t* state) {
  return read_handle<int64_t>(__func__, state, 0, [](const accel_state& s) { return s.accelerator->checkpoint_iteration(); });
}

extern "C" int accel_state_set_checkpoint_iteration(accel_state_t* state, int64_t iteration) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->set_checkpoint_iteration(iteration);
  });
}

extern "C" int accel_state_load_state(accel_state_t* state, const char* directory, accel_model_t* const* models,
                                      size_t num_models, accel_optimizer_t* const* optimizers, size_t num_optimizers,
                                      accel_scheduler_t* const* schedulers, size_t num_schedulers,
                                      accel_loader_t* const* loaders, size_t num_loaders) {
  return guarded(__func__, [&] {
    require(state, "state");
    const auto objects = checkpoint_objects(models, num_models, optimizers, num_optimizers, schedulers,
                                            num_schedulers, loaders, num_loaders);
    state->accelerator->load_state(optional_directory(directory), objects);
  });
}

extern "C" int accel_sink_write(accel_sink_t* sink, const void* data, size_t size) {
  return guarded(__func__, [&] {
    require(sink, "sink");
    if (size > 0) require(data, "data");
    sink->bytes.append(static_cast<const char*>(data), size);
  });
}

extern "C" int64_t accel_parts_count(const accel_parts_t* parts) {
  return read_handle<int64_t>(__func__, parts, 0, [](const accel_parts& p) { return p.parts->count(); });
}

extern "C" int accel_parts_release(accel_parts_t* parts) {
  return guarded(__func__, [&] {
    require(parts, "parts");
    std::string().swap(parts->current);
  });
}

extern "C" int accel_parts_read(accel_parts_t* parts, int64_t part, const void** data, size_t* size) {
  return guarded(__func__, [&] {
    require(parts, "parts");
    require(data, "data");
    require(size, "size");
    std::string().swap(parts->current);
    parts->current = parts->parts->read(part);
    *data = parts->current.data();
    *size = parts->current.size();
  });
}

extern "C" int accel_state_register_for_checkpointing(accel_state_t* state, const char* name, accel_save_object_fn save,
                                                      accel_load_object_fn load, void* payload) {
  return guarded(__func__, [&] {
    require(state, "state");
    auto object = registered_object(name, save, reinterpret_cast<const void*>(load), payload);
    object.load = [name = object.name, load, payload](const std::string& bytes) {
      check_loaded(name, load(bytes.data(), bytes.size(), payload));
    };
    state->accelerator->register_for_checkpointing(std::move(object));
  });
}

extern "C" int accel_state_register_parts_for_checkpointing(accel_state_t* state, const char* name,
                                                            accel_save_object_fn save, accel_load_parts_fn load,
                                                            void* payload) {
  return guarded(__func__, [&] {
    require(state, "state");
    auto object = registered_object(name, save, reinterpret_cast<const void*>(load), payload);
    object.load_parts = [name = object.name, load, payload](const accel::ckpt::SavedParts& saved) {
      accel_parts parts{{}, &saved, {}};
      check_loaded(name, load(&parts, payload));
    };
    state->accelerator->register_for_checkpointing(std::move(object));
  });
}
