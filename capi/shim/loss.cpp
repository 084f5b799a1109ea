#include "accel/loss.h"

#include "shim/entry_point.hpp"
#include "train/training_options.hpp"

extern "C" int accel_loss_compute(accel_tensor_t** out, const char* name, const accel_tensor_t* input,
                                  const accel_tensor_t* target, const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    require(name, "name");
    require(input, "input");
    require(target, "target");
    // Losses run every step: the defaults are resolved once.
    static const auto defaults = accel::train::loss_config(nullptr);
    const auto* settings = settings_of(options);
    const auto config = settings ? accel::train::loss_config(settings) : defaults;
    *out = new accel_tensor(accel::train::compute_loss(name, input->tensor, target->tensor, config));
  });
}
