// The command lines of `accel launch`, `accel config` and `accel env`: every flag under each of its spellings
// (torchrun's and accel's `--nproc-per-node`, Accelerate's `--num_processes`, with '-' or '_' alike), turned
// into the setting it sets.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel::cli {

// A command line that cannot be run; the commands print it with their usage hint and exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Settings as text, by setting name ("num_processes", "use_cpu", ...): what one layer (the flags, a config
// file) says. A flag without a value stores "true".
using SettingValues = std::map<std::string, std::string>;

// Which flags a command takes.
enum class FlagSet {
  Launch,  // every one, and the program after them
  Env,     // every one but those about the program (--module, --no-python)
  Config,  // those a config file holds, and --config-file
};

struct CommandLine {
  bool help = false;
  SettingValues flags;
  // The program and its arguments (FlagSet::Launch): the first argument that is not an option, or everything
  // after "--"; empty when there is none.
  std::vector<std::string> program;
};

// argv[0] is the command's name. Throws UsageError for an unknown flag (naming it), a missing value, a value
// given to a flag that takes none, --num_processes with --nproc-per-node, and a program where none belongs.
// Values are checked later, where they are resolved.
CommandLine parse_command_line(int argc, char** argv, FlagSet set);

// The flags that set `setting`, for messages: "--num-machines/--nnodes".
std::string flag_names(const std::string& setting);

}  // namespace accel::cli
