#include "cli/timeline_command.hpp"

#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/timeline.hpp"

namespace accel::cli {

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: accel timeline merge DIR [--out FILE]\n"
               "Merges the step timelines the ranks wrote (run with timeline=DIR or ACCEL_TIMELINE=DIR) into\n"
               "one Chrome trace, a process per rank: FILE (default DIR.json), for Perfetto or chrome://tracing.\n");
}

}  // namespace

int run_timeline(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    usage(stdout);
    return 0;
  }
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
