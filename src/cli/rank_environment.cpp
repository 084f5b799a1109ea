#include "cli/rank_environment.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "cli/cpu_shares.hpp"

extern char** environ;

namespace accel::cli {

namespace {

// Binds port 0 and asks the kernel which port it chose; nothing holds the port afterwards, so
// another process may take it before rank 0 does, as with torchrun.
std::optional<int> free_port_on(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.c_str(), "0", &hints, &found) != 0) return std::nullopt;
  std::optional<int> port;
  for (addrinfo* ai = found; ai != nullptr && !port; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      const in_port_t raw = bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                                        : reinterpret_cast<const sockaddr_in&>(bound).sin_port;
      port = ntohs(raw);
    }
    close(fd);
  }
  freeaddrinfo(found);
  return port;
}

}  // namespace

// The master address may name another interface of this host that refuses the bind; the
// loopback port space is then the best guess left.
std::optional<int> pick_free_port(const std::string& master_addr) {
  if (auto port = free_port_on(master_addr)) return port;
  return free_port_on("127.0.0.1");
}

// Variables every rank of this node shares in attempt `restart` of the job.
Variables common_variables(const LaunchOptions& options, int port, int restart) {
  Variables vars{
      {"WORLD_SIZE", std::to_string(options.nnodes * options.nproc_per_node)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      // torchrun's TORCHELASTIC_RESTART_COUNT; set on the first attempt too, so that a program can
      // always read it, and replacing any value the launcher itself was started with.
      {"ACCEL_RESTART_COUNT", std::to_string(restart)},
  };
  if (!options.job_key.empty()) vars.emplace_back("ACCEL_JOB_KEY", options.job_key);
  vars.insert(vars.end(), options.rank_variables.begin(), options.rank_variables.end());
  // N ranks each running a pool as wide as the machine oversubscribe it N times over.
  const std::string threads = std::to_string(std::max(1, usable_cpu_count() / options.nproc_per_node));
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    if (std::getenv(name) == nullptr) vars.emplace_back(name, threads);
  }
  return vars;
}

// The launcher's environment with `vars` added or replacing what it had.
std::vector<std::string> environment_with(const Variables& vars) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    const bool replaced = std::any_of(vars.begin(), vars.end(), [&](const auto& var) { return var.first == name; });
    if (!replaced) env.push_back(text);
  }
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

// The secret every rank presents to rank 0's store: the launcher's own ACCEL_JOB_KEY when it has one (the
// way to give every node of a job the same), else 128 random bits for a job on one node. A job on several
// nodes without one gets none, and is told what that leaves open.
std::string job_key_for(const LaunchOptions& options) {
  if (const char* given = std::getenv("ACCEL_JOB_KEY"); given != nullptr && *given != '\0') return given;
  if (options.nnodes > 1) {
    std::fprintf(stderr,
                 "accel launch: warning: no ACCEL_JOB_KEY: rank 0's store will serve anyone who reaches %s:%d; "
                 "export the same secret on every node (ACCEL_JOB_KEY=$(openssl rand -hex 16))\n",
                 options.master_addr.c_str(), options.master_port);
    return "";
  }
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    throw std::runtime_error(std::string("cannot draw the job's key: ") + std::strerror(errno));
  }
  static const char kHex[] = "0123456789abcdef";
  std::string key;
  for (const unsigned char byte : bytes) {
    key += kHex[byte >> 4];
    key += kHex[byte & 15];
  }
  return key;
}

}  // namespace accel::cli
