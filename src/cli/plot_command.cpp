#include "cli/plot_command.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "cli/share_script.hpp"

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
  return run_share_script("accel plot", "plot_run.py", {run_dir, out});
}

}  // namespace accel::cli
