// Run by `accel launch --nproc-per-node 2` on one host: once the process group is up, every socket this
// process listens on must be bound to a loopback address (c10d's store listened on *:<port>), and rank 0's
// store must refuse a connection that does not present the job's key.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "accel.h"

namespace {

int expect(bool ok, const std::string& what) {
  if (!ok) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return ok ? 0 : 1;
}

// The inodes of this process's sockets.
std::set<std::string> own_socket_inodes() {
  std::set<std::string> inodes;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return inodes;
  while (dirent* entry = readdir(fds)) {
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (readlink(link.c_str(), target, sizeof target - 1) <= 0) continue;
    const std::string text = target;
    if (text.rfind("socket:[", 0) == 0) inodes.insert(text.substr(8, text.size() - 9));
  }
  closedir(fds);
  return inodes;
}

struct Listening {
  std::string address;  // as /proc/net/tcp* writes it: hex, in the kernel's byte order
  bool ipv6;
};

// Every listening TCP socket of this process (state 0A in /proc/net/tcp and tcp6).
std::vector<Listening> listening_sockets() {
  const std::set<std::string> own = own_socket_inodes();
  std::vector<Listening> found;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the column names
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "0A" && own.count(inode) != 0) found.push_back({local, std::strstr(table, "tcp6") != nullptr});
    }
  }
  return found;
}

// 127.0.0.0/8 (its first byte is the last hex pair of the little-endian word), ::1, or ::ffff:127.x.
bool loopback(const Listening& socket) {
  const std::string address = socket.address.substr(0, socket.address.find(':'));
  if (!socket.ipv6) return address.size() == 8 && address.substr(6, 2) == "7F";
  return address == "00000000000000000000000001000000" ||
         (address.substr(0, 20) == "0000000000000000FFFF" && address.substr(30, 2) == "7F");
}

// Says hello to the store at MASTER_ADDR:MASTER_PORT with another key; true when it answers "refused" (0)
// and closes the connection.
bool stranger_refused() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::atoi(std::getenv("MASTER_PORT"))));
  inet_pton(AF_INET, std::getenv("MASTER_ADDR"), &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return false;
  }
  const std::string key = "not the job's key";
  std::string hello(1, '\1');
  const uint32_t version = 1;
  const uint64_t length = key.size();
  hello.append(reinterpret_cast<const char*>(&version), sizeof version);
  hello.append(reinterpret_cast<const char*>(&length), sizeof length);
  hello += key;
  bool refused = send(fd, hello.data(), hello.size(), 0) == static_cast<ssize_t>(hello.size());
  char reply = 1;
  refused = refused && recv(fd, &reply, 1, 0) == 1 && reply == 0;
  refused = refused && recv(fd, &reply, 1, 0) == 0;  // and then closed
  close(fd);
  return refused;
}

}  // namespace

int main() {
  accel_state_t* state = nullptr;
  if (accel_state_new(&state, nullptr) != ACCEL_OK) {
    std::fprintf(stderr, "accel_state_new: %s\n", accel_error_last());
    return 1;
  }
  int failures = expect(accel_state_wait_for_everyone(state) == ACCEL_OK, "the ranks meet");
  const int32_t rank = accel_state_process_index(state);
  const std::vector<Listening> sockets = listening_sockets();
  for (const Listening& socket : sockets) {
    std::fprintf(stderr, "rank %d listens on %s (%s)\n", rank, socket.address.c_str(), socket.ipv6 ? "tcp6" : "tcp");
    failures += expect(loopback(socket), "rank " + std::to_string(rank) + " listens beyond loopback: " + socket.address);
  }
  if (rank == 0) {
    failures += expect(!sockets.empty(), "rank 0 listens at all (its store)");
  } else {
    const char* key = std::getenv("ACCEL_JOB_KEY");
    failures += expect(key != nullptr && std::strlen(key) == 32, "accel launch hands the ranks a job key");
    failures += expect(stranger_refused(), "rank 0's store refuses a connection with another key");
  }
  failures += expect(accel_state_wait_for_everyone(state) == ACCEL_OK, "the ranks meet again");
  accel_state_free(state);
  return failures == 0 ? 0 : 1;
}
