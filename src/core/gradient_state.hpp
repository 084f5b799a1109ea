// Accelerate's GradientState, the part the data side feeds: which loader is active (innermost first),
// whether its current batch is its last, and how many real samples the last global batch holds.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace accel {

// What a loader publishes about its current epoch.
struct LoaderProgress {
  bool end_of_dataloader = false;
  // Real samples in the last global batch (gather_for_metrics keeps that many); -1 when unknown.
  int64_t remainder = -1;
};

class GradientState {
 public:
  // Whether the current step synchronises gradients and steps the optimizer (true outside accumulation).
  bool sync_gradients() const;
  // Accelerate's _do_sync, run on entering accumulate(): the last batch of the active loader always
  // syncs and resets the counter (with sync_with_dataloader); otherwise every num_steps-th step syncs.
  void do_sync(int64_t num_steps, bool sync_with_dataloader);
  // Accelerate's `accelerator.sync_gradients = value`: holds until the next do_sync.
  void set_sync_gradients(bool sync);
  // The accumulation counter (Accelerate's accelerator.step).
  int64_t step() const;
  void set_step(int64_t step);
  // As when made: counter 0, sync_gradients true, no active loader.
  void reset();

  void add_loader(const std::shared_ptr<LoaderProgress>& loader);
  void remove_loader(const LoaderProgress* loader);
  // The innermost active loader's progress; end false and remainder -1 when none is active.
  LoaderProgress active() const;

 private:
  LoaderProgress active_locked() const;

  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<LoaderProgress>> loaders_;
  bool sync_gradients_ = true;
  int64_t step_ = 0;
};

}  // namespace accel
