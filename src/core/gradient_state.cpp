#include "core/gradient_state.hpp"

#include <algorithm>

namespace accel {

void GradientState::add_loader(const std::shared_ptr<LoaderProgress>& loader) {
  std::lock_guard<std::mutex> lock(mutex_);
  loaders_.push_back(loader);
}

void GradientState::remove_loader(const LoaderProgress* loader) {
  std::lock_guard<std::mutex> lock(mutex_);
  loaders_.erase(std::remove_if(loaders_.begin(), loaders_.end(),
                                [&](const std::weak_ptr<LoaderProgress>& entry) {
                                  auto live = entry.lock();
                                  return !live || live.get() == loader;
                                }),
                 loaders_.end());
}

LoaderProgress GradientState::active() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return active_locked();
}

LoaderProgress GradientState::active_locked() const {
  for (auto it = loaders_.rbegin(); it != loaders_.rend(); ++it) {
    if (auto live = it->lock()) return *live;
  }
  return {};
}

bool GradientState::sync_gradients() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sync_gradients_;
}

void GradientState::set_sync_gradients(bool sync) {
  std::lock_guard<std::mutex> lock(mutex_);
  sync_gradients_ = sync;
}

void GradientState::do_sync(int64_t num_steps, bool sync_with_dataloader) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sync_with_dataloader && active_locked().end_of_dataloader) {
    step_ = 0;
    sync_gradients_ = true;
  } else {
    ++step_;
    sync_gradients_ = step_ % num_steps == 0;
  }
}

int64_t GradientState::step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return step_;
}

void GradientState::set_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
}

void GradientState::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  loaders_.clear();
  sync_gradients_ = true;
  step_ = 0;
}

}  // namespace accel
