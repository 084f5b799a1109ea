#include "cli/share_script.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace accel::cli {

namespace {

std::string share_directory() {
  char self[PATH_MAX] = {};
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return "";
  std::string dir(self, static_cast<size_t>(length));
  dir = dir.substr(0, dir.rfind('/'));
  return dir.substr(0, dir.rfind('/')) + "/share/accel/";
}

}  // namespace

int run_share_script(const char* command, const std::string& name, const std::vector<std::string>& args) {
  const std::string script = share_directory() + name;
  struct stat info {};
  if (::stat(script.c_str(), &info) != 0) {
    std::fprintf(stderr, "%s: the drawing script '%s' is missing from this installation\n", command, script.c_str());
    return 1;
  }
  const char* python = std::getenv("ACCEL_PYTHON");
  const std::string interpreter = python != nullptr && *python != '\0' ? python : "/usr/bin/python3";
  std::vector<std::string> words{interpreter, script};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  ::execv(interpreter.c_str(), argv.data());
  std::fprintf(stderr, "%s: cannot run '%s': %s\n", command, interpreter.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace accel::cli
