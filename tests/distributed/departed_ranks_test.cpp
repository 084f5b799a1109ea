#include "distributed/health/departed_ranks.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace accel::distributed {
namespace {

std::string identity_of(pid_t pid) {
  const std::string mine = process_identity();
  return mine.substr(0, mine.rfind(' ')) + " " + std::to_string(pid);
}

// A rank whose process exited is named, even before its parent reaps it; a live one and one on another
// host are not.
TEST(DepartedRanks, AnExitedProcessOnThisHostIsNamed) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  const pid_t alive = getppid();
  const std::vector<std::optional<std::string>> identities{
      process_identity(), identity_of(alive), identity_of(child), std::nullopt, "other-host/boot " + std::to_string(child)};
  EXPECT_EQ(departed_ranks(0, identities, std::chrono::milliseconds(2000)),
            "rank 2 (process " + std::to_string(child) + ") exited");
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(departed_ranks(0, identities, std::chrono::milliseconds(0)),
            "rank 2 (process " + std::to_string(child) + ") exited");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(departed_ranks(0, {process_identity(), identity_of(alive)}, std::chrono::milliseconds(50)), "");
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
}

}  // namespace
}  // namespace accel::distributed
