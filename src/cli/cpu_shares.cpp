#include "cli/cpu_shares.hpp"

#include <unistd.h>

#include <stdexcept>

namespace accel::cli {

std::vector<cpu_set_t> split_cpus(const cpu_set_t& allowed, int ranks) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  const int count = static_cast<int>(cpus.size());
  if (ranks < 1 || count < ranks) {
    throw std::runtime_error("--cpu-affinity needs a CPU for each of the " + std::to_string(ranks) +
                             " ranks of this node, and the launcher may use " + std::to_string(count) + " (" +
                             cpu_list(allowed) + ")");
  }
  std::vector<cpu_set_t> shares(static_cast<size_t>(ranks));
  size_t next = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    cpu_set_t& share = shares[static_cast<size_t>(rank)];
    CPU_ZERO(&share);
    const int size = count / ranks + (rank < count % ranks ? 1 : 0);
    for (int i = 0; i < size; ++i) CPU_SET(cpus[next++], &share);
  }
  return shares;
}

std::string cpu_list(const cpu_set_t& set) {
  std::string text;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    if (!text.empty()) text += ',';
    text += std::to_string(cpu);
    if (last > cpu) text += '-' + std::to_string(last);
    cpu = last;
  }
  return text;
}

int usable_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

}  // namespace accel::cli
