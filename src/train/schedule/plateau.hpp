// torch.optim.lr_scheduler.ReduceLROnPlateau's bookkeeping (torch 1.13): the best metric so far, the
// steps without improvement and the cooldown, apart from the optimizer whose lrs it lowers.
#pragma once

#include <cstdint>

namespace accel::train {

struct PlateauConfig {
  bool maximize = false;  // mode "max": a higher metric is better
  double factor = 0.1;  // new lr = lr * factor; must be < 1
  int64_t patience = 10;  // steps without improvement tolerated before reducing
  double threshold = 1e-4;  // how much better a metric must be to count as an improvement
  bool relative_threshold = true;  // threshold_mode "rel" (best * (1 -/+ threshold)) or "abs" (best -/+ threshold)
  int64_t cooldown = 0;  // steps after a reduction during which bad steps are not counted
  double min_lr = 0;  // no group's lr goes below it
  double eps = 1e-8;  // a reduction smaller than this is not applied
};

class Plateau {
 public:
  // The counters torch saves in its state_dict.
  struct Counters {
    double best;  // +inf in min mode, -inf in max mode until a first metric
    int64_t num_bad_epochs = 0;
    int64_t cooldown_counter = 0;
  };

  // factor >= 1: Error(InvalidArgument) (torch's "Factor should be < 1.0.").
  explicit Plateau(const PlateauConfig& config);

  // torch's step(metrics) up to the reduction: updates the counters and says whether the lrs are to be
  // reduced now (the counters then restart the cooldown, as in torch). A NaN metric is never better.
  bool record(double metric);
  // torch's _reduce_lr for one group: max(lr * factor, min_lr), or lr itself when that lowers it by eps
  // or less.
  double reduced(double lr) const;

  const Counters& counters() const { return counters_; }
  void restore(const Counters& counters) { counters_ = counters; }

 private:
  bool is_better(double metric) const;

  PlateauConfig config_;
  Counters counters_;
};

}  // namespace accel::train
