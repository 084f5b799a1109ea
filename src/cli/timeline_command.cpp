#include "cli/timeline_command.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cli/share_script.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"

namespace accel::cli {

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: accel timeline merge DIR [--out FILE]\n"
               "       accel timeline plot TRACE.json [--out FILE.png] [--steps N]\n"
               "merge: the step timelines the ranks wrote (run with timeline=DIR or ACCEL_TIMELINE=DIR) as one\n"
               "Chrome trace, a process per rank: FILE (default DIR.json), for Perfetto or chrome://tracing.\n"
               "plot: the last N (3) training steps of a trace drawn as a picture, a row per rank and track\n"
               "(default TRACE.png), with matplotlib.\n");
}

int run_plot(int argc, char** argv) {
  std::string trace = argv[2], out, steps = "3";
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (arg == "--steps" && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      steps = argv[++i];
    } else {
      std::fprintf(stderr, "accel timeline plot: unexpected argument '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (out.empty()) out = trace.substr(0, trace.rfind(".json")) + ".png";
  return run_share_script("accel timeline plot", "plot_timeline.py", {trace, out, steps});
}

}  // namespace

int run_timeline(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    usage(stdout);
    return 0;
  }
  if (argc >= 3 && std::string(argv[1]) == "plot") return run_plot(argc, argv);
  if (argc < 3 || std::string(argv[1]) != "merge") {
    usage(stderr);
    return 2;
  }
  std::string directory = argv[2], out;
  for (int i = 3; i < argc; ++i) {
    if (std::string(argv[i]) == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else {
      std::fprintf(stderr, "accel timeline: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  while (directory.size() > 1 && directory.back() == '/') directory.pop_back();
  if (out.empty()) out = directory + ".json";
  try {
    const std::string merged = timeline::merge_directory(directory);
    std::ofstream file(out, std::ios::trunc);
    file << merged;
    if (!file) fail(Code::Io, "cannot write '" + out + "'");
  } catch (const Error& error) {
    std::fprintf(stderr, "accel timeline: %s\n", error.what());
    return 1;
  }
  std::printf("accel timeline: %s\n", out.c_str());
  return 0;
}

}  // namespace accel::cli
