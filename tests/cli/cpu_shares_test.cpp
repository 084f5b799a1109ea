// accel launch --cpu-affinity's split of the launcher's CPUs among the ranks of a node.
#include "cli/cpu_shares.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel::cli {
namespace {

cpu_set_t set_of(std::initializer_list<int> cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return set;
}

std::vector<std::string> lists(const std::vector<cpu_set_t>& shares) {
  std::vector<std::string> text;
  for (const auto& share : shares) text.push_back(cpu_list(share));
  return text;
}

TEST(CpuShares, ListsRunsAsLinuxDoes) {
  EXPECT_EQ(cpu_list(set_of({})), "");
  EXPECT_EQ(cpu_list(set_of({3})), "3");
  EXPECT_EQ(cpu_list(set_of({0, 1, 2, 3, 8, 10, 11})), "0-3,8,10-11");
  EXPECT_EQ(cpu_list(set_of({CPU_SETSIZE - 2, CPU_SETSIZE - 1})),
            std::to_string(CPU_SETSIZE - 2) + "-" + std::to_string(CPU_SETSIZE - 1));
}

TEST(CpuShares, EveryRankGetsConsecutiveCpusTheFirstOnesTheLargerShares) {
  EXPECT_EQ(lists(split_cpus(set_of({0, 1}), 2)), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(lists(split_cpus(set_of({0, 1, 2, 3, 4}), 2)), (std::vector<std::string>{"0-2", "3-4"}));
  EXPECT_EQ(lists(split_cpus(set_of({0, 1, 2, 3, 4, 5, 6}), 3)), (std::vector<std::string>{"0-2", "3-4", "5-6"}));
  // The launcher's CPUs need not be neighbours (taskset -c 1,4,6,9).
  EXPECT_EQ(lists(split_cpus(set_of({1, 4, 6, 9}), 2)), (std::vector<std::string>{"1,4", "6,9"}));
  EXPECT_EQ(lists(split_cpus(set_of({2, 3}), 1)), (std::vector<std::string>{"2-3"}));
}

TEST(CpuShares, FewerCpusThanRanksIsRefusedNamingBoth) {
  try {
    split_cpus(set_of({2, 5}), 3);
    FAIL() << "no error";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(),
                 "--cpu-affinity needs a CPU for each of the 3 ranks of this node, and the launcher may use 2 (2,5)");
  }
}

}  // namespace
}  // namespace accel::cli
