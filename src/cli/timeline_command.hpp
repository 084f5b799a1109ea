// `accel timeline merge DIR [--out FILE]`: the ranks' traces (DIR/timeline.rank<r>.json) as one trace.
#pragma once

namespace accel::cli {

int run_timeline(int argc, char** argv);

}  // namespace accel::cli
