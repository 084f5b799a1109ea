#include "accelerator/accelerator.hpp"

#include "ckpt/project_checkpoints.hpp"
#include "core/error.hpp"
#include "distributed/state_options.hpp"

namespace accel {

Accelerator::Accelerator(const Options* options, const EnvLookup& env)
    : Accelerator(options, env, resolve_options(distributed::state_option_scope(), options, env)) {}

Accelerator::Accelerator(const Options* options, const EnvLookup& env, const ResolvedOptions& own)
    : state_(distributed::State::acquire(options, env)),
      training_(std::make_shared<train::TrainingLoop>(state_)),
      project_(ckpt::project_config(own)),
      background_saves_(std::make_shared<ckpt::BackgroundSaves>(state_)) {
  training_->set_gradient_accumulation_steps(own.get_int("gradient_accumulation_steps"));
  // The training half may outlive this object (an optimizer holds it): it reports through a weak link.
  training_->set_before_training([saves = std::weak_ptr<ckpt::BackgroundSaves>(background_saves_)] {
    if (auto alive = saves.lock()) alive->take_failure();
  });
}

Accelerator::~Accelerator() { training_->set_before_training({}); }

void Accelerator::register_for_checkpointing(ckpt::CustomObject object) {
  ckpt::check_custom_object_name(object.name);
  for (const auto& registered : custom_objects_) {
    if (registered->name == object.name) {
      fail(Code::InvalidArgument, "an object named '" + object.name + "' is already registered");
    }
  }
  custom_objects_.push_back(std::make_unique<ckpt::CustomObject>(std::move(object)));
}

void Accelerator::free_memory() {
  training_->free_memory();
  custom_objects_.clear();
}

ckpt::CheckpointObjects Accelerator::with_own(ckpt::CheckpointObjects objects) const {
  for (const auto& object : custom_objects_) objects.custom.push_back(object.get());
  objects.scaler = training_->scaler();
  objects.trackers = trackers_.get();
  return objects;
}

void Accelerator::save_state(const std::optional<std::string>& directory, ckpt::CheckpointObjects objects) {
  background_saves_->wait();
  const auto all = with_own(std::move(objects));
  if (directory) {
    ckpt::save_state(state_, *directory, all);
  } else {
    ckpt::save_project_checkpoint(state_, project_, all);
  }
}

void Accelerator::save_state_async(const std::optional<std::string>& directory, ckpt::CheckpointObjects objects) {
  const auto all = with_own(std::move(objects));
  if (directory) {
    background_saves_->start(state_, *directory, all);
  } else {
    ckpt::save_project_checkpoint_in_background(state_, project_, *background_saves_, all);
  }
}

void Accelerator::load_state(const std::optional<std::string>& directory, ckpt::CheckpointObjects objects) {
  background_saves_->wait();  // a save in flight may be the checkpoint to load
  const auto all = with_own(std::move(objects));
  if (directory) {
    ckpt::load_checkpoint(state_, project_, *directory, all);
  } else {
    ckpt::load_latest_checkpoint(state_, project_, all);
  }
}

void Accelerator::wait_for_save() { background_saves_->wait(); }

void Accelerator::set_checkpoint_iteration(int64_t iteration) {
  require_argument(iteration >= 0, "the checkpoint iteration must be >= 0, got " + std::to_string(iteration));
  project_.iteration = iteration;
}

void Accelerator::shutdown() {
  background_saves_->wait();  // rank 0's store goes with the group
  state_->shutdown();
}

void Accelerator::init_trackers(const std::string& project_dir, const std::string& run_name,
                                const std::string& config_json, const Options* options) {
  trackers_ = std::make_unique<tracking::Trackers>(state_->launch().rank == 0, project_dir, run_name, config_json, options);
}

tracking::Trackers& Accelerator::trackers() {
  if (!trackers_) fail(Code::InvalidState, "no trackers: call accel_state_init_trackers first");
  return *trackers_;
}

}  // namespace accel
