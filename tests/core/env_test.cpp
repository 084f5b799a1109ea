#include <gtest/gtest.h>

#include <map>

#include "core/env.hpp"
#include "core/error.hpp"

namespace accel {
namespace {

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void expect_environment_error(std::map<std::string, std::string> vars, const std::string& named) {
  try {
    parse_launch_env(fake_env(std::move(vars)));
    FAIL() << "no error; expected one naming " << named;
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::Environment);
    EXPECT_NE(std::string(error.what()).find(named), std::string::npos) << error.what();
  }
}

TEST(LaunchEnv, NothingSetMeansOneProcess) {
  auto info = parse_launch_env(fake_env({}));
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.launcher, "none");
}

TEST(LaunchEnv, TorchrunVariables) {
  auto info = parse_launch_env(fake_env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                         {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(info.master_port, 1234);
  EXPECT_EQ(info.group_rank, -1);
}

TEST(LaunchEnv, GroupRankNamesTheNode) {
  auto info = parse_launch_env(fake_env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"},
                                         {"GROUP_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}}));
  EXPECT_EQ(info.group_rank, 1);
  EXPECT_THROW(parse_launch_env(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "2"}})), Error);
  EXPECT_THROW(parse_launch_env(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "x"}})), Error);
}

TEST(LaunchEnv, SingleNodeDefaultsAddressAndLocalValues) {
  auto info = parse_launch_env(fake_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
}

TEST(LaunchEnv, Slurm) {
  auto info = parse_launch_env(fake_env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                         {"SLURM_NTASKS_PER_NODE", "4(x2)"}, {"MASTER_ADDR", "node1"}}));
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
}

TEST(LaunchEnv, OpenMpiAndPmi) {
  auto ompi = parse_launch_env(fake_env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_EQ(ompi.launcher, "openmpi");
  EXPECT_EQ(ompi.rank, 1);
  auto pmi = parse_launch_env(fake_env({{"PMI_RANK", "0"}, {"PMI_SIZE", "3"}}));
  EXPECT_EQ(pmi.launcher, "pmi");
  EXPECT_EQ(pmi.world_size, 3);
}

TEST(LaunchEnv, TorchrunWinsOverSlurm) {
  auto info = parse_launch_env(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "9"}}));
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.world_size, 2);
}

TEST(LaunchEnv, MalformedOrInconsistentValuesNameTheVariable) {
  expect_environment_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x'");
  expect_environment_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2");
  expect_environment_error({{"WORLD_SIZE", "0"}}, "WORLD_SIZE=0");
  expect_environment_error({{"WORLD_SIZE", "2"}}, "RANK");
  expect_environment_error({{"RANK", "1"}}, "WORLD_SIZE");
  expect_environment_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT");
  expect_environment_error({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}}, "MASTER_ADDR");
  expect_environment_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}}, "LOCAL_RANK=2");
}

TEST(LaunchEnv, FlagParsingFollowsAccelerate) {
  for (const char* yes : {"1", "true", "YES", "on", "t", "y"}) EXPECT_EQ(parse_flag(yes), true) << yes;
  for (const char* no : {"0", "false", "No", "OFF", "f", "n"}) EXPECT_EQ(parse_flag(no), false) << no;
  EXPECT_FALSE(parse_flag("2").has_value());
  EXPECT_FALSE(parse_flag("").has_value());
}

}  // namespace
}  // namespace accel
