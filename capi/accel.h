/* accel: the training-loop plumbing of Hugging Face Accelerate, as a C library. Umbrella header. */
#ifndef ACCEL_H
#define ACCEL_H

#include "accel/common.h"
#include "accel/version.h"
#include "accel/options.h"
#include "accel/state.h"
#include "accel/tensor.h"
#include "accel/collectives.h"
#include "accel/processes.h"
#include "accel/loader.h"
#include "accel/dealing.h"
#include "accel/loss.h"
#include "accel/model.h"
#include "accel/optimizer.h"
#include "accel/scheduler.h"
#include "accel/train.h"
#include "accel/train_step.h"
#include "accel/tracking.h"
#include "accel/checkpoint.h"

#endif
