// The file layout of a saved model: how tensors split into shards, their names, and which files of a
// directory a new save replaces.
#include "ckpt/model_layout.hpp"

#include <gtest/gtest.h>

namespace {

using accel::ckpt::is_model_file;
using accel::ckpt::plan_shards;
using Shards = std::vector<std::vector<size_t>>;

TEST(PlanShards, FillsInOrderUpToTheLimit) {
  EXPECT_EQ(plan_shards({4, 4, 4, 4}, 8), (Shards{{0, 1}, {2, 3}}));
  EXPECT_EQ(plan_shards({4, 4, 4}, 100), (Shards{{0, 1, 2}}));
  EXPECT_EQ(plan_shards({}, 8), Shards{});
}

TEST(PlanShards, ATensorLargerThanTheLimitHasAShardOfItsOwn) {
  EXPECT_EQ(plan_shards({20, 1, 1}, 8), (Shards{{0}, {1, 2}}));
  EXPECT_EQ(plan_shards({1, 20, 1}, 8), (Shards{{0}, {1}, {2}}));
  EXPECT_EQ(plan_shards({0, 20, 0}, 8), (Shards{{0}, {1}, {2}}));
}

TEST(ModelFiles, ShardNamesCountFromOne) {
  EXPECT_EQ(accel::ckpt::shard_file(0, 3), "model-00001-of-00003.safetensors");
  EXPECT_EQ(accel::ckpt::shard_file(99999, 100000), "model-100000-of-100000.safetensors");
}

TEST(ModelFiles, ASaveReplacesItsOwnFilesAndTheirTemporariesOnly) {
  for (const char* name : {"model.safetensors", "model.safetensors.index.json", "model-00002-of-00003.safetensors",
                           "model-00002-of-00003.safetensors.tmp.4242", "model.safetensors.tmp.1"}) {
    EXPECT_TRUE(is_model_file(name)) << name;
  }
  for (const char* name : {"config.json", "model.safetensors.bak", "model-2-of-x.safetensors", "model-00001.safetensors",
                           "model.safetensors.tmp.", "model.safetensors.tmp.12a", "model_1.safetensors"}) {
    EXPECT_FALSE(is_model_file(name)) << name;
  }
}

}  // namespace
