// The Python scripts the CLI runs for drawing (share/*.py): found beside the program, run with matplotlib.
#pragma once

#include <string>
#include <vector>

namespace accel::cli {

// Replaces the process with `python script args...`: the script is <prefix>/share/accel/<name> for
// <prefix>/bin/accel (the build tree mirrors that layout); python is $ACCEL_PYTHON, else /usr/bin/python3
// (Debian's, which has matplotlib). Returns only on failure, with 1 after printing why as `command`.
int run_share_script(const char* command, const std::string& name, const std::vector<std::string>& args);

}  // namespace accel::cli
