#include "distributed/state_options.hpp"

namespace accel::distributed {

const std::vector<std::string>& non_option_variables() {
  static const std::vector<std::string> names{"ACCEL_LIBRARY", "ACCEL_LIB_DIR", "ACCEL_PYTHON", "ACCEL_LAUNCHER",
                                              "ACCEL_RESTART_COUNT", "ACCEL_JOB_KEY"};
  return names;
}

}  // namespace accel::distributed
