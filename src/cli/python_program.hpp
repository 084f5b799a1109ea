// The program `accel launch` starts in each rank: as given, or, for a Python script (PROGRAM ending in .py,
// as `accelerate launch train.py`) or module (-m), through the Python that the accel package is installed
// into.
#pragma once

#include <string>
#include <vector>

#include "core/env.hpp"

namespace accel::cli {

struct Interpreter {
  std::string path;
  std::string why;  // how it was chosen, for `accel env`
};

// $ACCEL_PYTHON when set; else the first python3 on PATH when `python3 -c "import accel"` succeeds in it (an
// activated virtual environment the package was pip-installed into, say; the check runs it once, with the
// launcher's environment and its output discarded, and is skipped for a python3 in /usr/bin's directory,
// which is the fallback anyway); else /usr/bin/python3, Debian's.
Interpreter choose_python(const EnvLookup& env);

// argv for the ranks. A program ending in .py and, with `module`, a module name run as
// `PYTHON [-m] PROGRAM ARGS...` (PYTHON from choose_python, asked only then); with `no_python`, or any other
// program, as given. Throws UsageError for an empty program and for module with no_python.
std::vector<std::string> rank_command(const std::vector<std::string>& program, bool module, bool no_python,
                                      const EnvLookup& env);

}  // namespace accel::cli
