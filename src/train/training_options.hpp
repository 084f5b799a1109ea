// The settings of the training objects, each kind owning its keys, defaults and validation: prepare(model)
// (DDP's arguments), optimizers, schedulers and losses. None reads the environment: ACCEL_* variables
// set state settings only.
#pragma once

#include "core/options.hpp"
#include "train/loss/losses.hpp"
#include "train/model/model.hpp"
#include "train/optim/optimizer.hpp"
#include "train/schedule/scheduler.hpp"

namespace accel::train {

const OptionScope& prepare_option_scope();
const OptionScope& optimizer_option_scope();
const OptionScope& scheduler_option_scope();
const OptionScope& loss_option_scope();
const OptionScope& train_step_option_scope();

// Each resolves explicit_options (NULL: the defaults) against its object's keys. Throws
// Error(UnknownOption) for another object's key (naming where it belongs), Error(BadOptionValue).
PrepareConfig prepare_config(const Options* explicit_options);
OptimizerConfig optimizer_config(const Options* explicit_options);
SchedulerConfig scheduler_config(const Options* explicit_options);
LossConfig loss_config(const Options* explicit_options);
// The loss keys of resolved values: the loss scope's, which the train step's scope takes too.
LossConfig loss_config(const ResolvedOptions& values);

}  // namespace accel::train
