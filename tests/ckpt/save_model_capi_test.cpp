// save_model and load_weights through the C ABI on one process: one file below the shard size, shards
// and an index above it, tied weights stored once, a directory that never mixes two saves, and every way
// a saved model can fail to load (a clear error naming the file and tensor, and the model unchanged).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "accel.h"
#include "core/files.hpp"
#include "tiny_models.hpp"

namespace {

using accel::join_path;
using accel::list_directory;
using accel::path_exists;
using accel::remove_all;

std::string last_error() { return accel_error_last(); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Replaces the first `from` in the file with `to`, of the same length, so that a safetensors header keeps
// its length and offsets while one of its facts changes.
void patch(const std::string& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::string bytes = read_file(path);
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  bytes.replace(at, from.size(), to);
  write_file(path, bytes);
}

std::set<std::string> files_in(const std::string& directory) {
  const auto names = list_directory(directory);
  return {names.begin(), names.end()};
}

// Every parameter and buffer by name, as bytes.
std::map<std::string, std::string> contents(const accel_model_t* model) {
  std::map<std::string, std::string> all;
  const auto add = [&](const char* name, accel_tensor_t* tensor) {
    std::string bytes(static_cast<size_t>(accel_tensor_numel(tensor)) * accel_tensor_element_size(tensor), '\0');
    EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, bytes.data(), bytes.size()), ACCEL_OK) << last_error();
    all[name] = bytes;
    accel_tensor_free(tensor);
  };
  for (size_t i = 0; i < accel_model_num_parameters(model); ++i) {
    accel_tensor_t* tensor = nullptr;
    EXPECT_EQ(accel_model_parameter(model, i, &tensor), ACCEL_OK);
    add(accel_model_parameter_name(model, i), tensor);
  }
  for (size_t i = 0; i < accel_model_num_buffers(model); ++i) {
    accel_tensor_t* tensor = nullptr;
    EXPECT_EQ(accel_model_buffer(model, i, &tensor), ACCEL_OK);
    add(accel_model_buffer_name(model, i), tensor);
  }
  return all;
}

class SaveModel : public ::testing::Test {
 protected:
  void SetUp() override {
    directory = tiny_models::temp_file("saved_model");
    remove_all(directory);
    ASSERT_EQ(accel_state_new(&state, nullptr), ACCEL_OK) << last_error();
    model = load(tiny_models::mlp(tiny_models::temp_file("save_model_a.pt"), 0));
    ASSERT_EQ(accel_state_prepare_model(state, model, nullptr), ACCEL_OK) << last_error();
    // Another seed: loading into it shows whether the weights came from the files.
    fresh = load(tiny_models::mlp(tiny_models::temp_file("save_model_b.pt"), 1));
  }
  void TearDown() override {
    for (accel_model_t* made : models) accel_model_free(made);
    accel_state_free(state);
    remove_all(directory);
  }
  accel_model_t* load(const std::string& path) {
    accel_model_t* made = nullptr;
    EXPECT_EQ(accel_model_load(&made, path.c_str()), ACCEL_OK) << last_error();
    models.push_back(made);
    return made;
  }
  int save(const accel_model_t* which, size_t max_shard_size) {
    return accel_state_save_model(state, which, directory.c_str(), max_shard_size);
  }
  // Tries to load `directory` into the fresh model and expects `code` with a message holding each of
  // `fragments`, and the fresh model unchanged.
  void expect_refused(int code, const std::vector<std::string>& fragments) {
    const auto before = contents(fresh);
    EXPECT_EQ(accel_model_load_weights(fresh, directory.c_str()), code) << last_error();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(last_error().find(fragment), std::string::npos) << "'" << fragment << "' not in: " << last_error();
    }
    EXPECT_EQ(contents(fresh), before);
  }
  std::string in_directory(const std::string& name) const { return join_path(directory, name); }

  // The mlp's tensors: w1 [8, 16] 512 bytes, b1 64, w2 [16, 4] 256, b2 16. With a 300-byte limit w1 is
  // alone (larger than the limit), b1 cannot join it, and w2 + b2 fill the third shard.
  static constexpr size_t kThreeShards = 300;
  static constexpr const char* kIndex = "model.safetensors.index.json";
  std::string directory;
  accel_state_t* state = nullptr;
  accel_model_t* model = nullptr;
  accel_model_t* fresh = nullptr;
  std::vector<accel_model_t*> models;
};

TEST_F(SaveModel, BelowTheLimitOneFileHoldsEveryTensorAndLoadsBack) {
  ASSERT_EQ(save(model, 0), ACCEL_OK) << last_error();
  EXPECT_EQ(files_in(directory), (std::set<std::string>{"model.safetensors"}));
  ASSERT_NE(contents(fresh), contents(model));
  ASSERT_EQ(accel_model_load_weights(fresh, directory.c_str()), ACCEL_OK) << last_error();
  EXPECT_EQ(contents(fresh), contents(model));
}

TEST_F(SaveModel, AboveTheLimitShardsInOrderWithAnIndex) {
  ASSERT_EQ(save(model, kThreeShards), ACCEL_OK) << last_error();
  EXPECT_EQ(files_in(directory), (std::set<std::string>{kIndex, "model-00001-of-00003.safetensors",
                                                        "model-00002-of-00003.safetensors",
                                                        "model-00003-of-00003.safetensors"}));
  const std::string index = read_file(in_directory(kIndex));
  EXPECT_NE(index.find("\"total_size\": 848"), std::string::npos) << index;
  EXPECT_NE(index.find("\"w1\": \"model-00001-of-00003.safetensors\""), std::string::npos) << index;
  EXPECT_NE(index.find("\"b1\": \"model-00002-of-00003.safetensors\""), std::string::npos) << index;
  EXPECT_NE(index.find("\"w2\": \"model-00003-of-00003.safetensors\""), std::string::npos) << index;
  EXPECT_NE(index.find("\"b2\": \"model-00003-of-00003.safetensors\""), std::string::npos) << index;
  ASSERT_EQ(accel_model_load_weights(fresh, directory.c_str()), ACCEL_OK) << last_error();
  EXPECT_EQ(contents(fresh), contents(model));
}

TEST_F(SaveModel, SavingAgainLeavesOnlyTheNewSaveAndTheDirectorysOtherFiles) {
  ASSERT_EQ(save(model, kThreeShards), ACCEL_OK) << last_error();
  write_file(in_directory("config.json"), "{}");
  write_file(in_directory("model-00001-of-00002.safetensors.tmp.12345"), "left by a save killed while writing");
  // 600 bytes: w1 + b1, then w2 + b2.
  ASSERT_EQ(save(fresh, 600), ACCEL_OK) << last_error();
  EXPECT_EQ(files_in(directory), (std::set<std::string>{"config.json", kIndex, "model-00001-of-00002.safetensors",
                                                        "model-00002-of-00002.safetensors"}));
  ASSERT_EQ(accel_model_load_weights(model, directory.c_str()), ACCEL_OK) << last_error();
  EXPECT_EQ(contents(model), contents(fresh));
  ASSERT_EQ(save(fresh, 0), ACCEL_OK) << last_error();
  EXPECT_EQ(files_in(directory), (std::set<std::string>{"config.json", "model.safetensors"}));
}

TEST_F(SaveModel, TiedWeightsAreStoredOnceAndLoadedThroughTheStoredName) {
  accel_model_t* tied = load(tiny_models::tied(tiny_models::temp_file("tied_a.pt"), 0));
  accel_model_t* other = load(tiny_models::tied(tiny_models::temp_file("tied_b.pt"), 1));
  ASSERT_EQ(save(tied, 0), ACCEL_OK) << last_error();
  const std::string file = read_file(in_directory("model.safetensors"));
  EXPECT_NE(file.find("\"w1\""), std::string::npos);
  EXPECT_EQ(file.find("\"head.w\":{"), std::string::npos) << "the tied name is left out of the tensors";
  EXPECT_NE(file.find("\"head.scale\""), std::string::npos);
  EXPECT_NE(file.find("\"steps\""), std::string::npos);
  ASSERT_EQ(accel_model_load_weights(other, directory.c_str()), ACCEL_OK) << last_error();
  EXPECT_EQ(contents(other), contents(tied));
  // Sharded the same way (520 bytes: w1 alone, then the rest): head.w in no shard and not in the index.
  ASSERT_EQ(save(tied, 520), ACCEL_OK) << last_error();
  ASSERT_TRUE(path_exists(in_directory(kIndex)));
  EXPECT_EQ(read_file(in_directory(kIndex)).find("\"head.w\""), std::string::npos);
  ASSERT_EQ(accel_model_load_weights(other, directory.c_str()), ACCEL_OK) << last_error();
}

// A tied parameter is one parameter (listed once, under its first name), and a save records the tie as
// safetensors' save_model does, in the metadata of the file that holds the stored name: an untied copy of
// the model then loads both of its tensors from the one stored.
TEST_F(SaveModel, TiesAreRecordedAndAnUntiedCopyLoadsBothNamesFromTheStoredOne) {
  accel_model_t* tied = load(tiny_models::tied(tiny_models::temp_file("tied_d.pt"), 0));
  accel_model_t* untied = load(tiny_models::tied(tiny_models::temp_file("untied.pt"), 1, false, 1.0f));
  ASSERT_EQ(accel_model_num_parameters(tied), 2u);
  EXPECT_EQ(std::string(accel_model_parameter_name(tied, 1)), "b1");
  ASSERT_EQ(accel_model_num_parameters(untied), 3u);
  // 520 bytes: w1 (512) alone, then b1, head.scale and steps.
  for (const size_t shard_size : {size_t{0}, size_t{520}}) {
    ASSERT_EQ(save(tied, shard_size), ACCEL_OK) << last_error();
    const std::string holder = shard_size == 0 ? "model.safetensors" : "model-00001-of-00002.safetensors";
    EXPECT_NE(read_file(in_directory(holder)).find("\"head.w\":\"w1\""), std::string::npos) << holder;
    ASSERT_EQ(accel_model_load_weights(untied, directory.c_str()), ACCEL_OK) << last_error();
    auto loaded = contents(untied);
    EXPECT_EQ(loaded.at("head.w"), loaded.at("w1"));
    loaded.erase("head.w");
    EXPECT_EQ(loaded, contents(tied));
  }
}

TEST_F(SaveModel, FilesHoldingBothNamesOfATiedPairMustAgree) {
  // Saved from untied copies: both names are in the file. Equal values load into the tied model;
  // different ones cannot, as the model has one tensor for both.
  accel_model_t* tied = load(tiny_models::tied(tiny_models::temp_file("tied_c.pt"), 1));
  ASSERT_EQ(save(load(tiny_models::tied(tiny_models::temp_file("copy.pt"), 0, false)), 0), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_model_load_weights(tied, directory.c_str()), ACCEL_OK) << last_error();
  ASSERT_EQ(save(load(tiny_models::tied(tiny_models::temp_file("apart.pt"), 0, false, 1.0f)), 0), ACCEL_OK);
  fresh = tied;
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {"model.safetensors: 'head.w' is tied to 'w1'", "different values"});
}

TEST_F(SaveModel, ACheckpointsModelLoadsToo) {
  ASSERT_EQ(accel_state_save_state(state, directory.c_str(), &model, 1, nullptr, 0, nullptr, 0, nullptr, 0), ACCEL_OK)
      << last_error();
  ASSERT_EQ(accel_model_load_weights(fresh, directory.c_str()), ACCEL_OK) << last_error();
  EXPECT_EQ(contents(fresh), contents(model));
}

TEST_F(SaveModel, ADirectoryWithoutASavedModelIsAnIoError) {
  expect_refused(ACCEL_ERR_IO, {"no saved model in '" + directory + "'", "model.safetensors", kIndex});
}

TEST_F(SaveModel, AMissingShardIsNamedWithTheIndex) {
  ASSERT_EQ(save(model, kThreeShards), ACCEL_OK) << last_error();
  remove_all(in_directory("model-00002-of-00003.safetensors"));
  expect_refused(ACCEL_ERR_IO, {kIndex, "model-00002-of-00003.safetensors, which cannot be read"});
}

TEST_F(SaveModel, AShardMustHoldWhatTheIndexMapsToIt) {
  ASSERT_EQ(save(model, kThreeShards), ACCEL_OK) << last_error();
  const std::string index = read_file(in_directory(kIndex));
  patch(in_directory(kIndex), "\"b1\": \"model-00002", "\"b1\": \"model-00003");
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT,
                 {"model-00003-of-00003.safetensors: no tensor 'b1', which " + std::string(kIndex) + " maps to it"});
  std::string without_b2 = index;
  const std::string b2_line = "\"b2\": \"model-00003-of-00003.safetensors\",\n    ";
  ASSERT_NE(without_b2.find(b2_line), std::string::npos) << index;
  write_file(in_directory(kIndex), without_b2.erase(without_b2.find(b2_line), b2_line.size()));
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT,
                 {"model-00003-of-00003.safetensors: holds 'b2', which " + std::string(kIndex) + " does not list"});
}

TEST_F(SaveModel, EveryTensorIsCheckedAgainstTheModel) {
  ASSERT_EQ(save(model, 0), ACCEL_OK) << last_error();
  const std::string path = in_directory("model.safetensors");
  const std::string saved = read_file(path);
  patch(path, "\"shape\":[8,16]", "\"shape\":[16,8]");
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {path + ": 'w1' has shape [16, 8], the model's is [8, 16]"});
  write_file(path, saved);
  patch(path, "\"w1\":{\"dtype\":\"F32\"", "\"w1\":{\"dtype\":\"I32\"");
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {path + ": 'w1' is Int, the model's is Float"});
  write_file(path, saved);
  patch(path, "\"b1\"", "\"c1\"");
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {path + ": holds 'c1', which the model does not have"});
  write_file(path, saved);
  accel_model_t* larger = load(tiny_models::mlp_with_unused_parameter(tiny_models::temp_file("unused.pt")));
  fresh = larger;
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {path + ": no tensor 'unused', which the model has"});
}

TEST_F(SaveModel, DamagedFilesAreRefusedNamingThem) {
  ASSERT_EQ(save(model, kThreeShards), ACCEL_OK) << last_error();
  const std::string shard = in_directory("model-00003-of-00003.safetensors");
  const std::string bytes = read_file(shard);
  write_file(shard, bytes.substr(0, bytes.size() - 8));
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {shard, "truncated"});
  write_file(shard, bytes);
  write_file(in_directory(kIndex), "{\"metadata\": {\"total_size\": 848}, \"weight_map\": {\"w1\": \"../model.safetensors\"}}");
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {kIndex, "not a file of the index's directory"});
  write_file(in_directory(kIndex), "{\"weight_map\": {}");
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {kIndex, "malformed model index"});
  write_file(in_directory(kIndex), "{\"weight_map\": {}}");
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {kIndex, "no metadata.total_size"});
}

TEST_F(SaveModel, BothASingleFileAndAnIndexAreRefused) {
  ASSERT_EQ(save(model, kThreeShards), ACCEL_OK) << last_error();
  write_file(in_directory("model.safetensors"), read_file(in_directory("model-00001-of-00003.safetensors")));
  expect_refused(ACCEL_ERR_INVALID_ARGUMENT, {"holds both model.safetensors and " + std::string(kIndex)});
}

// A trailing slash is the same directory; "" is refused before anything is written.
TEST_F(SaveModel, TheDirectoryIsNormalisedOrRefused) {
  ASSERT_EQ(accel_state_save_model(state, model, (directory + "/").c_str(), 0), ACCEL_OK) << last_error();
  EXPECT_TRUE(accel::path_exists(in_directory("model.safetensors")));
  ASSERT_EQ(accel_model_load_weights(fresh, (directory + "//").c_str()), ACCEL_OK) << last_error();
  EXPECT_EQ(contents(fresh), contents(model));
  EXPECT_EQ(accel_state_save_model(state, model, "", 0), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("the model directory is \"\""), std::string::npos) << last_error();
}

TEST_F(SaveModel, NullArgumentsAreRefused) {
  EXPECT_EQ(accel_state_save_model(nullptr, model, directory.c_str(), 0), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_save_model(state, nullptr, directory.c_str(), 0), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_save_model(state, model, nullptr, 0), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_model_load_weights(nullptr, directory.c_str()), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_model_load_weights(model, nullptr), ACCEL_ERR_NULL_ARGUMENT);
}

}  // namespace
