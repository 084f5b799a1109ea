// save_state / load_state on one process through the C ABI: what a damaged, mismatched or half-written
// checkpoint does (a clear error, and nothing restored), and that saving replaces a checkpoint whole.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "accel.h"
#include "core/files.hpp"
#include "tiny_models.hpp"

namespace {

using accel::create_directories;
using accel::path_exists;
using accel::remove_all;

std::string last_error() { return accel_error_last(); }

class CheckpointCapi : public ::testing::Test {
 protected:
  void SetUp() override { start(nullptr); }
  // A state with `options` (none: defaults), a prepared MLP and its AdamW.
  void start(const accel_options_t* options) {
    directory = tiny_models::temp_file("checkpoints");
    remove_all(directory);
    ASSERT_EQ(accel_state_new(&state, options), ACCEL_OK) << last_error();
    ASSERT_EQ(accel_model_load(&model, tiny_models::mlp(tiny_models::temp_file("ckpt.pt")).c_str()), ACCEL_OK);
    ASSERT_EQ(accel_state_prepare_model(state, model, nullptr), ACCEL_OK) << last_error();
    ASSERT_EQ(accel_optimizer_new(&optimizer, model, "adamw", nullptr), ACCEL_OK) << last_error();
    ASSERT_EQ(accel_model_parameter(model, 0, &w1), ACCEL_OK);
  }
  void TearDown() override {
    stop();
    remove_all(directory);
  }
  void stop() {
    accel_tensor_free(w1);
    accel_optimizer_free(optimizer);
    accel_model_free(model);
    accel_state_free(state);
    w1 = nullptr;
    optimizer = nullptr;
    model = nullptr;
    state = nullptr;
  }
  float& first_weight() {
    void* data = nullptr;
    EXPECT_EQ(accel_tensor_data(w1, &data), ACCEL_OK);
    return *static_cast<float*>(data);
  }
  int save(const std::string& path) {
    return accel_state_save_state(state, path.c_str(), &model, 1, &optimizer, 1, nullptr, 0, nullptr, 0);
  }
  int load(const std::string& path) {
    return accel_state_load_state(state, path.c_str(), &model, 1, &optimizer, 1, nullptr, 0, nullptr, 0);
  }
  // Saves with w1[0] = 1, then sets w1[0] = 2, so that a load shows whether it restored anything.
  std::string saved_then_changed() {
    const std::string path = directory + "/one";
    first_weight() = 1.0f;
    EXPECT_EQ(save(path), ACCEL_OK) << last_error();
    first_weight() = 2.0f;
    return path;
  }

  std::string directory;
  accel_state_t* state = nullptr;
  accel_model_t* model = nullptr;
  accel_optimizer_t* optimizer = nullptr;
  accel_tensor_t* w1 = nullptr;
};

TEST_F(CheckpointCapi, LoadingRestoresTheSavedWeightsAndWritesTheManifest) {
  const std::string path = saved_then_changed();
  EXPECT_TRUE(path_exists(path + "/metadata.json"));
  EXPECT_TRUE(path_exists(path + "/model.safetensors"));
  EXPECT_TRUE(path_exists(path + "/rank0/states.safetensors"));
  EXPECT_FALSE(path_exists(path + ".saving"));
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 1.0f);
}

TEST_F(CheckpointCapi, SavingAgainReplacesTheCheckpointWhole) {
  const std::string path = saved_then_changed();
  std::ofstream(path + "/stale_file") << "from the first save";
  ASSERT_EQ(save(path), ACCEL_OK) << last_error();
  EXPECT_FALSE(path_exists(path + "/stale_file"));
  EXPECT_FALSE(path_exists(path + ".saving"));
  first_weight() = 3.0f;
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 2.0f);
}

TEST_F(CheckpointCapi, ASaveKilledHalfwayLeavesThePreviousCheckpointLoadable) {
  const std::string path = saved_then_changed();
  // What a run killed while saving leaves: a partial staging folder beside the finished checkpoint.
  create_directories(path + ".saving/rank0");
  std::ofstream(path + ".saving/model.safetensors") << "partial";
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 1.0f);
  ASSERT_EQ(save(path), ACCEL_OK) << last_error();  // the leftover is cleared, not mistaken for a checkpoint
  EXPECT_FALSE(path_exists(path + ".saving"));
}

TEST_F(CheckpointCapi, ATruncatedFileIsNamedAndNothingIsRestored) {
  const std::string path = saved_then_changed();
  // The rank's file is read after the model's: a failure there must not leave the model restored.
  const std::string rank_file = path + "/rank0/states.safetensors";
  struct stat status;
  ASSERT_EQ(::stat(rank_file.c_str(), &status), 0);
  ASSERT_EQ(::truncate(rank_file.c_str(), status.st_size / 2), 0);
  EXPECT_EQ(load(path), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("rank0/states.safetensors"), std::string::npos) << last_error();
  EXPECT_EQ(first_weight(), 2.0f);
}

TEST_F(CheckpointCapi, AMissingFileIsAnIoErrorNamingIt) {
  const std::string path = saved_then_changed();
  ASSERT_EQ(std::remove((path + "/model.safetensors").c_str()), 0);
  EXPECT_EQ(load(path), ACCEL_ERR_IO);
  EXPECT_NE(last_error().find("model.safetensors"), std::string::npos) << last_error();
  EXPECT_EQ(load(directory + "/none"), ACCEL_ERR_IO);
  EXPECT_NE(last_error().find("metadata.json"), std::string::npos) << last_error();
  EXPECT_EQ(first_weight(), 2.0f);
}

// register_for_checkpointing: a caller's object as bytes. `value` is what the object holds; `fail` makes
// its callbacks return non-zero.
struct Counter {
  int64_t value = 0;
  bool fail_save = false;
  bool fail_load = false;
  int loads = 0;
  std::vector<std::string>* order = nullptr;  // names, in the order load callbacks ran
  std::string name;
};

int save_counter(accel_sink_t* sink, void* payload) {
  auto* counter = static_cast<Counter*>(payload);
  if (counter->fail_save) return 7;
  return accel_sink_write(sink, &counter->value, sizeof counter->value) == ACCEL_OK ? 0 : 1;
}

int load_counter(const void* data, size_t size, void* payload) {
  auto* counter = static_cast<Counter*>(payload);
  if (counter->fail_load || size != sizeof counter->value) return 9;
  std::memcpy(&counter->value, data, size);
  ++counter->loads;
  if (counter->order != nullptr) counter->order->push_back(counter->name);
  return 0;
}

// register_parts_for_checkpointing: an object any number of processes load, here the sum of every saving
// process's counter; `read` records the sizes of the parts it read.
struct PartsCounter {
  int64_t value = 0;
  int64_t parts_seen = -1;
  bool read_past_the_end = false;  // also reads one part too many, whose error fails the load
  int loads = 0;
};

int load_parts_counter(accel_parts_t* parts, void* payload) {
  auto* counter = static_cast<PartsCounter*>(payload);
  counter->parts_seen = accel_parts_count(parts);
  int64_t sum = 0;
  const int64_t last = counter->read_past_the_end ? counter->parts_seen : counter->parts_seen - 1;
  for (int64_t part = 0; part <= last; ++part) {
    const void* data = nullptr;
    size_t size = 0;
    if (accel_parts_read(parts, part, &data, &size) != ACCEL_OK || size != sizeof(int64_t)) return 3;
    int64_t value = 0;
    std::memcpy(&value, data, size);
    if (accel_parts_release(parts) != ACCEL_OK) return 4;
    sum += value;
  }
  counter->value = sum;
  ++counter->loads;
  return 0;
}

int save_parts_counter(accel_sink_t* sink, void* payload) {
  auto* counter = static_cast<PartsCounter*>(payload);
  return accel_sink_write(sink, &counter->value, sizeof counter->value) == ACCEL_OK ? 0 : 1;
}

TEST_F(CheckpointCapi, AnotherWorldSizeOrObjectListIsRefused) {
  const std::string path = saved_then_changed();
  EXPECT_EQ(accel_state_load_state(state, path.c_str(), &model, 1, nullptr, 0, nullptr, 0, nullptr, 0),
            ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("1 optimizers, 0 were given"), std::string::npos) << last_error();

  std::ifstream in(path + "/metadata.json");
  std::string manifest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = manifest.find("\"world_size\": 1");
  ASSERT_NE(at, std::string::npos) << manifest;
  manifest.replace(at, 15, "\"world_size\": 4");
  // Loaders resume on another number of processes (ckpt.resume_on_other_world_size); a registered object's
  // bytes are one process's own, so a checkpoint holding one is refused there.
  const auto loaders = manifest.find("\"num_loaders\": 0");
  ASSERT_NE(loaders, std::string::npos) << manifest;
  manifest.replace(loaders, 16, "\"num_loaders\": 0,\n  \"custom_objects\": [\"counter\"]");
  std::ofstream(path + "/metadata.json") << manifest;
  Counter counter;
  ASSERT_EQ(accel_state_register_for_checkpointing(state, "counter", save_counter, load_counter, &counter), ACCEL_OK);
  EXPECT_EQ(load(path), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("saved by 4 processes, this run has 1, and the registered object 'counter' holds a "
                              "state per process"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(first_weight(), 2.0f);
}

TEST_F(CheckpointCapi, APartsObjectReadsEverySavingProcesssBytesOnAnyNumberOfProcesses) {
  PartsCounter counter{5};
  ASSERT_EQ(accel_state_register_parts_for_checkpointing(state, "shares", save_parts_counter, load_parts_counter, &counter),
            ACCEL_OK) << last_error();
  const std::string path = saved_then_changed();
  counter.value = 0;
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(counter.parts_seen, 1);
  EXPECT_EQ(counter.value, 5);

  // As if saved by 3 processes, whose parts hold 5, 7 and 9: this one process reads them all.
  std::string manifest = accel::read_file(path + "/metadata.json");
  const auto at = manifest.find("\"world_size\": 1");
  ASSERT_NE(at, std::string::npos) << manifest;
  manifest.replace(at, 15, "\"world_size\": 3");
  std::ofstream(path + "/metadata.json") << manifest;
  for (const int64_t rank : {1, 2}) {
    create_directories(path + "/rank" + std::to_string(rank));
    const int64_t value = 5 + 2 * rank;
    std::ofstream(path + "/rank" + std::to_string(rank) + "/custom_checkpoint_shares.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(&value), sizeof value);
  }
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(counter.parts_seen, 3);
  EXPECT_EQ(counter.value, 21);
  EXPECT_EQ(first_weight(), 1.0f);

  // A part past the saving processes fails the load naming the object, the model untouched.
  first_weight() = 2.0f;
  counter.read_past_the_end = true;
  EXPECT_EQ(load(path), ACCEL_ERR_CALLBACK);
  EXPECT_NE(last_error().find("'shares'"), std::string::npos) << last_error();
  EXPECT_EQ(first_weight(), 2.0f);
  counter.read_past_the_end = false;

  // A saving process's part gone: an Io error naming its file, before any callback.
  const int loads = counter.loads;
  ASSERT_EQ(std::remove((path + "/rank2/custom_checkpoint_shares.bin").c_str()), 0);
  EXPECT_EQ(load(path), ACCEL_ERR_IO);
  EXPECT_NE(last_error().find("rank2/custom_checkpoint_shares.bin"), std::string::npos) << last_error();
  EXPECT_EQ(counter.loads, loads);

  EXPECT_EQ(accel_parts_count(nullptr), 0);
  const void* data = nullptr;
  size_t size = 0;
  EXPECT_EQ(accel_parts_read(nullptr, 0, &data, &size), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_parts_release(nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_register_parts_for_checkpointing(state, "other", save_parts_counter, nullptr, &counter),
            ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_register_parts_for_checkpointing(state, "shares", save_parts_counter, load_parts_counter, &counter),
            ACCEL_ERR_INVALID_ARGUMENT);
}

TEST_F(CheckpointCapi, AModelWithOtherTensorsIsRefusedNamingTheFile) {
  const std::string path = saved_then_changed();
  accel_model_t* other = nullptr;
  ASSERT_EQ(accel_model_load(&other, tiny_models::mlp_with_unused_parameter(tiny_models::temp_file("other.pt")).c_str()), ACCEL_OK);
  EXPECT_EQ(accel_state_load_state(state, path.c_str(), &other, 1, &optimizer, 1, nullptr, 0, nullptr, 0),
            ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("model.safetensors: no tensor 'unused', which the model has"), std::string::npos) << last_error();
  accel_model_free(other);
}

TEST_F(CheckpointCapi, NullArgumentsAreRefused) {
  EXPECT_EQ(accel_state_save_state(nullptr, directory.c_str(), nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0),
            ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_save_state(state, directory.c_str(), nullptr, 1, nullptr, 0, nullptr, 0, nullptr, 0),
            ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_save_state(state, nullptr, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0),
            ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("no project_dir"), std::string::npos) << last_error();
  accel_model_t* none = nullptr;
  EXPECT_EQ(accel_state_load_state(state, directory.c_str(), &none, 1, nullptr, 0, nullptr, 0, nullptr, 0),
            ACCEL_ERR_NULL_ARGUMENT);
}

// Numbered checkpoints in a project: checkpoint_<i>, the oldest removed beyond total_limit, the latest
// loaded by number when no folder is named, and the numbering going on after the checkpoint loaded.
TEST_F(CheckpointCapi, ProjectCheckpointsAreNumberedRotatedAndResumedByNumber) {
  stop();
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  const std::string project = tiny_models::temp_file("project");
  remove_all(project);
  ASSERT_EQ(accel_options_set_string(options, "project_dir", project.c_str()), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(options, "total_limit", 2), ACCEL_OK);
  start(options);
  const auto save_numbered = [&](float weight) {
    first_weight() = weight;
    return accel_state_save_state(state, nullptr, &model, 1, &optimizer, 1, nullptr, 0, nullptr, 0);
  };
  const auto load_latest = [&] {
    return accel_state_load_state(state, nullptr, &model, 1, &optimizer, 1, nullptr, 0, nullptr, 0);
  };
  EXPECT_EQ(load_latest(), ACCEL_ERR_IO);
  EXPECT_NE(last_error().find("no checkpoint_<i>"), std::string::npos) << last_error();
  for (int i = 0; i < 11; ++i) ASSERT_EQ(save_numbered(static_cast<float>(i)), ACCEL_OK) << last_error();
  // By number, not by name: checkpoint_10 is the latest although "checkpoint_9" sorts after it.
  EXPECT_FALSE(path_exists(project + "/checkpoints/checkpoint_8"));
  EXPECT_TRUE(path_exists(project + "/checkpoints/checkpoint_9"));
  EXPECT_TRUE(path_exists(project + "/checkpoints/checkpoint_10"));
  first_weight() = -1.0f;
  ASSERT_EQ(load_latest(), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 10.0f);

  // Loading checkpoint_9 by name makes the next save checkpoint_10 again, which exists: refused.
  ASSERT_EQ(accel_state_load_state(state, (project + "/checkpoints/checkpoint_9/").c_str(), &model, 1, &optimizer, 1,
                                   nullptr, 0, nullptr, 0), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 9.0f);
  EXPECT_EQ(save_numbered(0.0f), ACCEL_ERR_IO);
  EXPECT_NE(last_error().find("checkpoint_10' already exists"), std::string::npos) << last_error();
  accel_options_free(options);
  remove_all(project);
}

}  // namespace

TEST_F(CheckpointCapi, RegisteredObjectsAreSavedPerRankAndRestoredInRegistrationOrder) {
  std::vector<std::string> order;
  Counter a{10, false, false, 0, &order, "b_second_name"};
  Counter b{20, false, false, 0, &order, "a_first_name"};
  ASSERT_EQ(accel_state_register_for_checkpointing(state, "b_second_name", save_counter, load_counter, &a), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_state_register_for_checkpointing(state, "a_first_name", save_counter, load_counter, &b), ACCEL_OK) << last_error();
  const std::string path = saved_then_changed();
  EXPECT_TRUE(path_exists(path + "/rank0/custom_checkpoint_b_second_name.bin"));
  EXPECT_TRUE(path_exists(path + "/rank0/custom_checkpoint_a_first_name.bin"));
  EXPECT_NE(accel::read_file(path + "/metadata.json").find("\"custom_objects\": [\"b_second_name\", \"a_first_name\"]"),
            std::string::npos);
  a.value = 11;
  b.value = 21;
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(a.value, 10);
  EXPECT_EQ(b.value, 20);
  EXPECT_EQ(order, (std::vector<std::string>{"b_second_name", "a_first_name"}));
  EXPECT_EQ(first_weight(), 1.0f);
}

TEST_F(CheckpointCapi, RegisteringRefusesDuplicatesBadNamesAndNulls) {
  Counter a;
  ASSERT_EQ(accel_state_register_for_checkpointing(state, "counter", save_counter, load_counter, &a), ACCEL_OK);
  EXPECT_EQ(accel_state_register_for_checkpointing(state, "counter", save_counter, load_counter, &a), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'counter' is already registered"), std::string::npos) << last_error();
  for (const char* bad : {"", ".hidden", "a/b", "sp ace"}) {
    EXPECT_EQ(accel_state_register_for_checkpointing(state, bad, save_counter, load_counter, &a), ACCEL_ERR_INVALID_ARGUMENT) << bad;
  }
  EXPECT_EQ(accel_state_register_for_checkpointing(state, nullptr, save_counter, load_counter, &a), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_register_for_checkpointing(state, "x", nullptr, load_counter, &a), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_register_for_checkpointing(state, "x", save_counter, nullptr, &a), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_register_for_checkpointing(nullptr, "x", save_counter, load_counter, &a), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_sink_write(nullptr, "x", 1), ACCEL_ERR_NULL_ARGUMENT);
}

TEST_F(CheckpointCapi, MissingAndExtraRegisteredObjectsAreNamedBeforeAnyLoadCallback) {
  Counter a{1};
  ASSERT_EQ(accel_state_register_for_checkpointing(state, "kept", save_counter, load_counter, &a), ACCEL_OK);
  const std::string without_extra = saved_then_changed();
  Counter b{2};
  ASSERT_EQ(accel_state_register_for_checkpointing(state, "added_later", save_counter, load_counter, &b), ACCEL_OK);
  EXPECT_EQ(load(without_extra), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'added_later' is not in the checkpoint"), std::string::npos) << last_error();
  EXPECT_EQ(a.loads, 0);
  EXPECT_EQ(first_weight(), 2.0f);

  // A checkpoint with an object this handle does not register: another handle of the same process state
  // has its own registrations.
  const std::string with_extra = directory + "/two";
  ASSERT_EQ(save(with_extra), ACCEL_OK) << last_error();
  accel_state_t* other = nullptr;
  ASSERT_EQ(accel_state_new(&other, nullptr), ACCEL_OK) << last_error();
  Counter c;
  ASSERT_EQ(accel_state_register_for_checkpointing(other, "kept", save_counter, load_counter, &c), ACCEL_OK);
  EXPECT_EQ(accel_state_load_state(other, with_extra.c_str(), &model, 1, &optimizer, 1, nullptr, 0, nullptr, 0),
            ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'added_later', which is not registered"), std::string::npos) << last_error();
  EXPECT_EQ(c.loads, 0);
  accel_state_free(other);

  // A listed object whose file is gone: an Io error naming it, before any callback.
  ASSERT_EQ(std::remove((with_extra + "/rank0/custom_checkpoint_added_later.bin").c_str()), 0);
  EXPECT_EQ(load(with_extra), ACCEL_ERR_IO);
  EXPECT_NE(last_error().find("custom_checkpoint_added_later.bin"), std::string::npos) << last_error();
  EXPECT_EQ(a.loads, 0);
  EXPECT_EQ(b.loads, 0);
}

TEST_F(CheckpointCapi, AFailingCallbackFailsTheSaveOrLoadNamingTheObject) {
  Counter a{5};
  ASSERT_EQ(accel_state_register_for_checkpointing(state, "flaky", save_counter, load_counter, &a), ACCEL_OK);
  const std::string path = saved_then_changed();
  a.fail_save = true;
  const std::string other = directory + "/other";
  EXPECT_EQ(save(other), ACCEL_ERR_CALLBACK);
  EXPECT_NE(last_error().find("'flaky'"), std::string::npos) << last_error();
  EXPECT_FALSE(path_exists(other));
  EXPECT_FALSE(path_exists(other + ".saving"));

  a.fail_load = true;
  a.value = 6;
  EXPECT_EQ(load(path), ACCEL_ERR_CALLBACK);
  EXPECT_NE(last_error().find("'flaky'"), std::string::npos) << last_error();
  EXPECT_EQ(a.value, 6);
  EXPECT_EQ(first_weight(), 2.0f);  // registered objects load first: the model is untouched
  a.fail_load = false;
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(a.value, 5);
}

TEST_F(CheckpointCapi, TheManifestRecordsTheTrackersRunAndLastLoggedStep) {
  const std::string without = directory + "/without";
  ASSERT_EQ(save(without), ACCEL_OK) << last_error();
  EXPECT_EQ(accel::read_file(without + "/metadata.json").find("tracker_run"), std::string::npos);

  ASSERT_EQ(accel_state_init_trackers(state, (directory + "/runs").c_str(), "first_run", nullptr, nullptr), ACCEL_OK)
      << last_error();
  const std::string before_logging = directory + "/before";
  ASSERT_EQ(save(before_logging), ACCEL_OK) << last_error();
  EXPECT_NE(accel::read_file(before_logging + "/metadata.json").find("\"tracker_run\": \"first_run\",\n  \"tracker_last_step\": -1"),
            std::string::npos);
  const char* names[] = {"loss"};
  const double values[] = {0.5};
  ASSERT_EQ(accel_state_log(state, names, values, 1, 7), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_state_log(state, names, values, 1, 12), ACCEL_OK) << last_error();
  const std::string path = directory + "/with";
  ASSERT_EQ(save(path), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_state_finish_trackers(state), ACCEL_OK);
  const std::string manifest = accel::read_file(path + "/metadata.json");
  EXPECT_NE(manifest.find("\"tracker_run\": \"first_run\",\n  \"tracker_last_step\": 12"), std::string::npos) << manifest;
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();  // the keys are read back
}

// Rotation happens after the new checkpoint is in place: a numbered save that fails (here a registered
// object's save callback) leaves every older checkpoint, and the next good save rotates the oldest out.
TEST_F(CheckpointCapi, AFailedNumberedSaveCostsNoOlderCheckpoint) {
  stop();
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  const std::string project = tiny_models::temp_file("project_rotation");
  remove_all(project);
  ASSERT_EQ(accel_options_set_string(options, "project_dir", project.c_str()), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(options, "total_limit", 2), ACCEL_OK);
  start(options);
  accel_options_free(options);
  Counter counter;
  ASSERT_EQ(accel_state_register_for_checkpointing(state, "counter", save_counter, load_counter, &counter), ACCEL_OK);
  const auto save_numbered = [&] {
    return accel_state_save_state(state, nullptr, &model, 1, &optimizer, 1, nullptr, 0, nullptr, 0);
  };
  ASSERT_EQ(save_numbered(), ACCEL_OK) << last_error();
  ASSERT_EQ(save_numbered(), ACCEL_OK) << last_error();
  counter.fail_save = true;
  EXPECT_EQ(save_numbered(), ACCEL_ERR_CALLBACK);
  EXPECT_TRUE(path_exists(project + "/checkpoints/checkpoint_0"));
  EXPECT_TRUE(path_exists(project + "/checkpoints/checkpoint_1"));
  EXPECT_FALSE(path_exists(project + "/checkpoints/checkpoint_2"));
  counter.fail_save = false;
  ASSERT_EQ(save_numbered(), ACCEL_OK) << last_error();
  EXPECT_FALSE(path_exists(project + "/checkpoints/checkpoint_0"));
  EXPECT_TRUE(path_exists(project + "/checkpoints/checkpoint_1"));
  EXPECT_TRUE(path_exists(project + "/checkpoints/checkpoint_2"));
  remove_all(project);
}

// Background saving on one process (the 2-process checks are in background_save_test.sh).
namespace {

int save_async(accel_state_t* state, accel_model_t* model, accel_optimizer_t* optimizer, const char* path) {
  return accel_state_save_state_async(state, path, &model, 1, &optimizer, 1, nullptr, 0, nullptr, 0);
}

// Makes every file write of this process fail with EFBIG (root too), as a full disk would, until it goes.
class FileWritesFail {
 public:
  FileWritesFail() {
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &previous_);
    struct rlimit none = previous_;
    none.rlim_cur = 0;
    ::setrlimit(RLIMIT_FSIZE, &none);
  }
  ~FileWritesFail() {
    ::setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  struct rlimit previous_;
  void (*previous_handler_)(int);
};

}  // namespace

// The snapshot is taken during the call: a change right after it does not reach the files, which are the
// same bytes as a blocking save's at that moment.
TEST_F(CheckpointCapi, ABackgroundSaveHoldsTheObjectsAsTheyWereAtTheCall) {
  first_weight() = 1.0f;
  const std::string blocking = directory + "/blocking", background = directory + "/background";
  ASSERT_EQ(save(blocking), ACCEL_OK) << last_error();
  ASSERT_EQ(save_async(state, model, optimizer, background.c_str()), ACCEL_OK) << last_error();
  first_weight() = 2.0f;
  ASSERT_EQ(accel_state_wait_for_save(state), ACCEL_OK) << last_error();
  EXPECT_FALSE(path_exists(background + ".saving"));
  for (const char* file : {"model.safetensors", "states.safetensors", "rank0/states.safetensors", "metadata.json"}) {
    EXPECT_EQ(accel::read_file(blocking + "/" + file), accel::read_file(background + "/" + file)) << file;
  }
  ASSERT_EQ(load(background), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 1.0f);
  EXPECT_EQ(accel_state_wait_for_save(state), ACCEL_OK);  // nothing in flight: at once
}

// One snapshot in flight: a second save returns only once the first is in place.
TEST_F(CheckpointCapi, ASaveWhileABackgroundSaveIsInFlightWaitsForIt) {
  const std::string first = directory + "/first", second = directory + "/second";
  first_weight() = 1.0f;
  ASSERT_EQ(save_async(state, model, optimizer, first.c_str()), ACCEL_OK) << last_error();
  first_weight() = 2.0f;
  ASSERT_EQ(save_async(state, model, optimizer, second.c_str()), ACCEL_OK) << last_error();
  EXPECT_TRUE(path_exists(first + "/metadata.json"));
  EXPECT_FALSE(path_exists(first + ".saving"));
  first_weight() = 3.0f;
  ASSERT_EQ(load(second), ACCEL_OK) << last_error();  // load waits too
  EXPECT_EQ(first_weight(), 2.0f);
  ASSERT_EQ(load(first), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 1.0f);
}

TEST_F(CheckpointCapi, FreeingTheStateWaitsForTheBackgroundSave) {
  const std::string path = directory + "/at_free";
  ASSERT_EQ(save_async(state, model, optimizer, path.c_str()), ACCEL_OK) << last_error();
  stop();
  EXPECT_TRUE(path_exists(path + "/metadata.json"));
  EXPECT_FALSE(path_exists(path + ".saving"));
}

// A write that fails in the background: the previous checkpoint stays, the staging folder goes, and the
// next reporting call (here the optimizer step) returns the failure once, doing nothing else.
TEST_F(CheckpointCapi, ABackgroundFailureIsReportedOnceByTheNextCallAndKeepsThePreviousCheckpoint) {
  const std::string path = saved_then_changed();  // w1[0] = 1 saved, 2 now
  {
    const FileWritesFail full_disk;
    ASSERT_EQ(save_async(state, model, optimizer, path.c_str()), ACCEL_OK) << last_error();
    int code = ACCEL_OK;
    for (int i = 0; i < 1000 && code == ACCEL_OK; ++i) {
      code = accel_optimizer_step(optimizer);  // no gradients: changes nothing
      if (code == ACCEL_OK) ::usleep(10000);
    }
    EXPECT_EQ(code, ACCEL_ERR_IO);
    EXPECT_NE(last_error().find("the background save to '" + path + "' failed: rank 0: "), std::string::npos) << last_error();
    EXPECT_NE(last_error().find(path + ".saving/"), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("previous checkpoint there, if any, is intact"), std::string::npos) << last_error();
  }
  EXPECT_EQ(accel_state_wait_for_save(state), ACCEL_OK) << last_error();  // reported once
  EXPECT_EQ(accel_optimizer_step(optimizer), ACCEL_OK) << last_error();
  EXPECT_FALSE(path_exists(path + ".saving"));
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 1.0f);

  // The same failure through wait_for_save, and a save reporting it instead of saving.
  {
    const FileWritesFail full_disk;
    ASSERT_EQ(save_async(state, model, optimizer, path.c_str()), ACCEL_OK) << last_error();
    EXPECT_EQ(accel_state_wait_for_save(state), ACCEL_ERR_IO);
    EXPECT_EQ(accel_state_wait_for_save(state), ACCEL_OK);
    ASSERT_EQ(save_async(state, model, optimizer, path.c_str()), ACCEL_OK) << last_error();
    const std::string other = directory + "/other";
    EXPECT_EQ(save(other), ACCEL_ERR_IO);  // waits, reports, and writes nothing
    EXPECT_NE(last_error().find("the background save to '" + path + "' failed"), std::string::npos) << last_error();
    EXPECT_FALSE(path_exists(other + ".saving"));
  }
  ASSERT_EQ(save(directory + "/other"), ACCEL_OK) << last_error();
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 1.0f);
}

TEST_F(CheckpointCapi, NumberedBackgroundSavesRotateOnceInPlace) {
  stop();
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  const std::string project = tiny_models::temp_file("project_background");
  remove_all(project);
  ASSERT_EQ(accel_options_set_string(options, "project_dir", project.c_str()), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(options, "total_limit", 2), ACCEL_OK);
  start(options);
  accel_options_free(options);
  for (int i = 0; i < 3; ++i) {
    first_weight() = static_cast<float>(i);
    ASSERT_EQ(save_async(state, model, optimizer, nullptr), ACCEL_OK) << last_error();
  }
  first_weight() = -1.0f;
  ASSERT_EQ(accel_state_load_state(state, nullptr, &model, 1, &optimizer, 1, nullptr, 0, nullptr, 0), ACCEL_OK)
      << last_error();
  EXPECT_EQ(first_weight(), 2.0f);
  EXPECT_FALSE(path_exists(project + "/checkpoints/checkpoint_0"));
  EXPECT_TRUE(path_exists(project + "/checkpoints/checkpoint_1"));
  EXPECT_TRUE(path_exists(project + "/checkpoints/checkpoint_2"));
  remove_all(project);
}

TEST_F(CheckpointCapi, BackgroundSaveArgumentsAreChecked) {
  EXPECT_EQ(accel_state_save_state_async(nullptr, directory.c_str(), nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0),
            ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_save_state_async(state, directory.c_str(), nullptr, 1, nullptr, 0, nullptr, 0, nullptr, 0),
            ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_save_state_async(state, nullptr, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0),
            ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("no project_dir"), std::string::npos) << last_error();
  EXPECT_EQ(accel_state_wait_for_save(nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_wait_for_save(state), ACCEL_OK);
}

// Runs the body with the working directory set to `directory`, and restores the previous one.
template <class Body>
void in_working_directory(const std::string& directory, Body&& body) {
  char previous[4096];
  ASSERT_NE(::getcwd(previous, sizeof previous), nullptr);
  ASSERT_EQ(::chdir(directory.c_str()), 0);
  body();
  ASSERT_EQ(::chdir(previous), 0);
}

// "ckpt/" staged into "ckpt/.saving" and then failed to rename that into its own parent; "" and "./"
// wrote a whole checkpoint before the rename failed. Each left the staging folder behind.
TEST_F(CheckpointCapi, TheDirectoryIsNormalisedOrRefusedBeforeAnythingIsWritten) {
  const std::string path = directory + "/one";
  first_weight() = 1.0f;
  ASSERT_EQ(save(path + "/"), ACCEL_OK) << last_error();
  EXPECT_TRUE(path_exists(path + "/metadata.json"));
  EXPECT_FALSE(path_exists(path + "/.saving"));
  EXPECT_FALSE(path_exists(path + ".saving"));
  first_weight() = 2.0f;
  ASSERT_EQ(save_async(state, model, optimizer, (path + "//").c_str()), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_state_wait_for_save(state), ACCEL_OK) << last_error();
  EXPECT_FALSE(path_exists(path + "/.saving"));
  first_weight() = 3.0f;
  ASSERT_EQ(load(path + "/"), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 2.0f);

  const std::string working = directory + "/working";
  create_directories(working);
  in_working_directory(working, [&] {
    for (const char* refused : {"", "./", ".", "one/.."}) {
      EXPECT_EQ(save(refused), ACCEL_ERR_INVALID_ARGUMENT) << refused;
      EXPECT_NE(last_error().find(refused[0] == '\0' ? "is \"\"" : "ends in '.' or '..' or is the root"),
                std::string::npos)
          << last_error();
      EXPECT_EQ(save_async(state, model, optimizer, refused), ACCEL_ERR_INVALID_ARGUMENT) << refused;
      EXPECT_EQ(accel_state_wait_for_save(state), ACCEL_OK) << last_error();
    }
  });
  EXPECT_EQ(accel::list_directory(working), std::vector<std::string>{});
  EXPECT_FALSE(path_exists(directory + "/working.saving"));
  EXPECT_FALSE(path_exists(directory + "/.saving"));
}

// A save whose writing fails leaves the previous checkpoint and no staging folder.
TEST_F(CheckpointCapi, AFailedWriteLeavesNoStagingFolder) {
  const std::string path = saved_then_changed();
  {
    const FileWritesFail full_disk;
    EXPECT_EQ(save(path), ACCEL_ERR_IO);
  }
  EXPECT_FALSE(path_exists(path + ".saving"));
  ASSERT_EQ(load(path), ACCEL_OK) << last_error();
  EXPECT_EQ(first_weight(), 1.0f);
}
