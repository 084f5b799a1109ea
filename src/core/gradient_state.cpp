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
  for (auto it = loaders_.rbegin(); it != loaders_.rend(); ++it) {
    if (auto live = it->lock()) return *live;
  }
  return {};
}

}  // namespace accel
