#include "cli/python_program.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "cli/launch_flags.hpp"
#include "core/files.hpp"

extern char** environ;

namespace accel::cli {

namespace {

constexpr const char kDefaultPython[] = "/usr/bin/python3";

// The first executable python3 in PATH's directories, or "".
std::string python3_on_path(const EnvLookup& env) {
  const auto path = env("PATH");
  if (!path) return "";
  size_t start = 0;
  while (start <= path->size()) {
    const size_t end = std::min(path->find(':', start), path->size());
    const std::string directory = path->substr(start, end - start);
    const std::string candidate = join_path(directory.empty() ? "." : directory, "python3");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// Whether `python -c "import accel"` exits 0, its standard streams on /dev/null.
bool imports_accel(const std::string& python) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0);
  }
  std::string program = python;
  std::string flag = "-c";
  std::string code = "import accel";
  char* argv[] = {program.data(), flag.data(), code.data(), nullptr};
  pid_t pid = -1;
  const int failed = posix_spawn(&pid, python.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (failed != 0) return false;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Whether python is Debian's own python3, found by another name (/bin/python3 on a merged /usr), so that it
// needs no check: it is what the check would fall back to. A virtual environment's python3 links to the same
// binary, yet is another Python (its own site-packages), so the directory decides, not the binary.
bool is_default_python(const std::string& python) {
  const auto directory_of = [](const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : slash == 0 ? std::string("/") : path.substr(0, slash);
  };
  const auto real = [](const std::string& path) {
    char resolved[PATH_MAX];
    return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
  };
  const std::string name = python.substr(python.rfind('/') + 1);
  return name == "python3" && real(directory_of(python)) == real(directory_of(kDefaultPython));
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Interpreter choose_python(const EnvLookup& env) {
  if (const auto given = env("ACCEL_PYTHON"); given && !given->empty()) return {*given, "ACCEL_PYTHON"};
  const std::string on_path = python3_on_path(env);
  if (on_path.empty()) return {kDefaultPython, "the default: no python3 on PATH"};
  if (is_default_python(on_path)) return {kDefaultPython, "the default, which is the python3 on PATH"};
  if (imports_accel(on_path)) return {on_path, "the python3 on PATH, which imports accel"};
  return {kDefaultPython, "the default: the python3 on PATH (" + on_path + ") cannot import accel"};
}

std::vector<std::string> rank_command(const std::vector<std::string>& program, bool module, bool no_python,
                                      const EnvLookup& env) {
  if (program.empty()) throw UsageError(module ? "-m needs the module to run" : "missing the program to run");
  if (module && no_python) throw UsageError("--module and --no-python cannot be used together");
  if (no_python || (!module && !ends_with(program.front(), ".py"))) return program;
  std::vector<std::string> command{choose_python(env).path};
  if (module) command.emplace_back("-m");
  command.insert(command.end(), program.begin(), program.end());
  return command;
}

}  // namespace accel::cli
