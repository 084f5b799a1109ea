// `accel plot RUN_DIR [--out FILE.png]`: the scalars a run logged, one panel per name, against step.
#pragma once

namespace accel::cli {

int run_plot(int argc, char** argv);

}  // namespace accel::cli
