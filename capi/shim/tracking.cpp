#include "accel/tracking.h"

#include <cmath>

#include "shim/entry_point.hpp"
#include "tracking/progress.hpp"

extern "C" int accel_state_init_trackers(accel_state_t* state, const char* project_dir, const char* run_name,
                                         const char* config_json, const accel_options_t* options) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(project_dir, "project_dir");
    require(run_name, "run_name");
    state->accelerator->init_trackers(project_dir, run_name, config_json ? config_json : "", settings_of(options));
  });
}

extern "C" int accel_state_log(accel_state_t* state, const char* const* names, const double* values, size_t count,
                               int64_t step) {
  return guarded(__func__, [&] {
    require(state, "state");
    if (count > 0) {
      require(names, "names");
      require(values, "values");
    }
    std::vector<accel::tracking::Scalar> scalars;
    for (size_t i = 0; i < count; ++i) {
      require(names[i], "names[i]");
      scalars.push_back({names[i], values[i]});
    }
    state->accelerator->trackers().log(scalars, step);
  });
}

extern "C" int accel_state_finish_trackers(accel_state_t* state) {
  return guarded(__func__, [&] {
    require(state, "state");
    state->accelerator->finish_trackers();
  });
}

extern "C" int accel_state_print(const accel_state_t* state, const char* text) {
  return guarded(__func__, [&] {
    require(state, "state");
    require(text, "text");
    accel::tracking::ProgressBar::print(state->accelerator->state()->launch().local_rank == 0, text);
  });
}

extern "C" int accel_progress_new(accel_progress_t** out, const accel_state_t* state, int64_t total,
                                  const char* description) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    *out = new accel_progress{{}, std::make_unique<accel::tracking::ProgressBar>(state->accelerator->state()->launch().local_rank == 0, total,
                                                                            description ? description : "")};
  });
}

extern "C" int accel_progress_update(accel_progress_t* progress, int64_t steps, double loss) {
  return guarded(__func__, [&] {
    require(progress, "progress");
    progress->bar->advance(steps, std::isnan(loss) ? std::nullopt : std::optional<double>(loss));
  });
}

extern "C" void accel_progress_free(accel_progress_t* progress) { release(__func__, progress); }
