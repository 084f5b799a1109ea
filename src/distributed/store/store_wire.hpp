// The wire format of the job's key-value store (store_server.hpp serves it, job_store.hpp speaks it):
// little-endian integers, strings as a u64 length and the bytes. A request is one operation byte and its
// fields; every request gets exactly one reply, sent in one write.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace accel::distributed::wire {

// Bumped whenever a message changes; a hello of another version is refused.
constexpr uint32_t kVersion = 2;

enum class Op : uint8_t {
  Hello = 1,       // version u32, job key, generation i64 -> u8 1 accepted (0: refused; 2: another
                   // generation of this job, retry; then closed)
  Set = 2,         // key, value                      -> u8 0
  Get = 3,         // key, timeout_ms i64             -> u8 0 and the value, or u8 1 (timed out)
  Add = 4,         // key, delta i64                  -> the new value i64 (kept as decimal text)
  CompareSet = 5,  // key, expected, desired          -> the value now (c10d's TCPStore semantics)
  Check = 6,       // count i64, keys                 -> u8 1 when every key is set
  Wait = 7,        // count i64, keys, timeout_ms i64 -> u8 0 when all are set, u8 1 when timed out
  Delete = 8,      // key                             -> u8 1 when it was there
  NumKeys = 9,     //                                 -> i64
};

// A timeout on the wire: milliseconds, or -1 for none (c10d's kNoTimeout, zero).
inline int64_t encode_timeout(std::chrono::milliseconds timeout) { return timeout.count() == 0 ? -1 : timeout.count(); }

void put_u8(std::string& out, uint8_t value);
void put_u32(std::string& out, uint32_t value);
void put_i64(std::string& out, int64_t value);
void put_string(std::string& out, const std::string& value);

// Reads from a socket: each throws std::runtime_error when the peer closed the connection or the read
// failed, and, with a deadline, when nothing came by then (a message holding "timed out").
class Reader {
 public:
  Reader(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  uint8_t u8(std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  uint32_t u32();
  int64_t i64();
  std::string string();

 private:
  void exact(void* data, size_t size, std::optional<std::chrono::steady_clock::time_point> deadline);

  int fd_;
  std::string peer_;
};

// Writes all of data; std::runtime_error naming peer when the connection is gone.
void send_all(int fd, const std::string& data, const std::string& peer);

}  // namespace accel::distributed::wire
