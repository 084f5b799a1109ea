#include "cli/plot_command.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace accel::cli {

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: accel plot RUN_DIR [--out FILE.png]\n"
               "Draws every scalar of RUN_DIR/metrics.jsonl against step, one panel each, into FILE.png\n"
               "(default RUN_DIR/metrics.png), with matplotlib (python: $ACCEL_PYTHON, else /usr/bin/python3).\n");
}

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// The drawing script ships beside the program: <prefix>/share/accel/plot_run.py for <prefix>/bin/accel
// (the build tree mirrors that layout).
std::string script_path() {
  char self[PATH_MAX] = {};
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return "";
  std::string dir(self, static_cast<size_t>(length));
  dir = dir.substr(0, dir.rfind('/'));
  return dir.substr(0, dir.rfind('/')) + "/share/accel/plot_run.py";
}

}  // namespace

int run_plot(int argc, char** argv) {
  std::string run_dir, out;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    }
    if (arg == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (run_dir.empty() && arg.rfind("--", 0) != 0) {
      run_dir = arg;
    } else {
      std::fprintf(stderr, "accel plot: unexpected argument '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (run_dir.empty()) {
    usage(stderr);
    return 2;
  }
  if (!exists(run_dir + "/metrics.jsonl")) {
    std::fprintf(stderr, "accel plot: '%s/metrics.jsonl' does not exist (log with jsonl among log_with)\n",
                 run_dir.c_str());
    return 1;
  }
  if (out.empty()) out = run_dir + "/metrics.png";
  const std::string script = script_path();
  if (!exists(script)) {
    std::fprintf(stderr, "accel plot: the drawing script '%s' is missing from this installation\n", script.c_str());
    return 1;
  }
  const char* python = std::getenv("ACCEL_PYTHON");
  const std::string interpreter = python != nullptr && *python != '\0' ? python : "/usr/bin/python3";
  std::vector<char*> args{const_cast<char*>(interpreter.c_str()), const_cast<char*>(script.c_str()),
                          const_cast<char*>(run_dir.c_str()), const_cast<char*>(out.c_str()), nullptr};
  ::execv(interpreter.c_str(), args.data());
  std::fprintf(stderr, "accel plot: cannot run '%s': %s\n", interpreter.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace accel::cli
