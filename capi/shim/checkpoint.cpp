#include "accel/checkpoint.h"

#include "ckpt/checkpoint.hpp"
#include "ckpt/project_checkpoints.hpp"
#include "shim/guard.hpp"
#include "shim/handles.hpp"

using accel::capi::guarded;
using accel::capi::require;

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
  return {objects_of<accel_model_t, accel::train::Model>(models, num_models, "models", &accel_model::model),
          objects_of<accel_optimizer_t, accel::train::AcceleratedOptimizer>(optimizers, num_optimizers, "optimizers",
                                                                             &accel_optimizer::optimizer),
          objects_of<accel_scheduler_t, accel::train::AcceleratedScheduler>(schedulers, num_schedulers, "schedulers",
                                                                             &accel_scheduler::scheduler),
          objects_of<accel_loader_t, accel::data::Loader>(loaders, num_loaders, "loaders", &accel_loader::loader)};
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
    if (directory == nullptr) {
      accel::ckpt::save_project_checkpoint(state->state, objects);
    } else {
      accel::ckpt::save_state(state->state, directory, objects);
    }
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
    if (directory == nullptr) {
      accel::ckpt::load_latest_checkpoint(state->state, objects);
    } else {
      accel::ckpt::load_checkpoint(state->state, directory, objects);
    }
  });
}
