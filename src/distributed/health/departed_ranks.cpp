#include "distributed/health/departed_ranks.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <thread>

#include "distributed/topology/node_layout.hpp"

namespace accel::distributed {

namespace {

std::string this_host() { return this_node_key(-1).substr(3); }  // without "-1@"

// Gone: no such process, or one that has exited and waits for its parent to reap it.
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t name_end = line.rfind(')');  // the command name may hold spaces and parentheses
  if (name_end == std::string::npos || name_end + 2 >= line.size()) return false;
  const char state = line[name_end + 2];
  return state == 'Z' || state == 'X';
}

struct Departed {
  int32_t rank;
  pid_t pid;
};

std::vector<Departed> gone_now(int32_t self, const std::vector<std::optional<std::string>>& identities,
                               const std::string& here) {
  std::vector<Departed> gone;
  for (size_t r = 0; r < identities.size(); ++r) {
    if (static_cast<int32_t>(r) == self || !identities[r]) continue;
    const std::string& identity = *identities[r];
    const size_t space = identity.rfind(' ');
    if (space == std::string::npos || identity.substr(0, space) != here) continue;
    pid_t pid = 0;
    try {
      pid = static_cast<pid_t>(std::stol(identity.substr(space + 1)));
    } catch (const std::exception&) {
      continue;
    }
    if (pid > 0 && process_gone(pid)) gone.push_back({static_cast<int32_t>(r), pid});
  }
  return gone;
}

}  // namespace

std::string process_identity() { return this_host() + " " + std::to_string(::getpid()); }

std::string departed_ranks(int32_t self, const std::vector<std::optional<std::string>>& identities,
                           std::chrono::milliseconds grace, const std::vector<int32_t>& names) {
  const std::string here = this_host();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  std::vector<Departed> gone = gone_now(self, identities, here);
  while (gone.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    gone = gone_now(self, identities, here);
  }
  std::string named;
  for (const Departed& departed : gone) {
    const auto index = static_cast<size_t>(departed.rank);
    const int32_t rank = index < names.size() ? names[index] : departed.rank;
    named += (named.empty() ? "" : ", ") + ("rank " + std::to_string(rank) + " (process " +
                                            std::to_string(departed.pid) + ") exited");
  }
  return named;
}

}  // namespace accel::distributed
