// The saved loader position: what encode writes, decode reads back, and the damage decode refuses.
#include "data/loader_state.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"

namespace accel::data {
namespace {

LoaderState sample() {
  LoaderState state;
  state.epoch = 3;
  state.yielded = 7;
  state.dataset_size = 100;
  state.generator_state = std::string("\x00\x01\x02generator", 12);
  state.mid_epoch = true;
  return state;
}

void expect_refused(const std::string& bytes, const std::string& fragment) {
  try {
    decode_loader_state(bytes);
    ADD_FAILURE() << "accepted; expected an error containing '" << fragment << "'";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::InvalidArgument) << error.what();
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

std::string with_int_at(std::string bytes, size_t offset, int64_t value) {
  bytes.replace(offset, sizeof value, reinterpret_cast<const char*>(&value), sizeof value);
  return bytes;
}

TEST(LoaderState, DecodesWhatItEncodes) {
  const std::string bytes = encode_loader_state(sample());
  EXPECT_EQ(bytes.substr(0, 8), "ACCLDR01");
  EXPECT_EQ(bytes.size(), 8 + 4 * 8 + 12 + 8u);
  const LoaderState back = decode_loader_state(bytes);
  EXPECT_EQ(back.epoch, 3);
  EXPECT_EQ(back.yielded, 7);
  EXPECT_EQ(back.dataset_size, 100);
  EXPECT_EQ(back.generator_state, sample().generator_state);
  EXPECT_TRUE(back.mid_epoch);
  EXPECT_EQ(encode_loader_state(back), bytes);
}

TEST(LoaderState, RefusesDamagedBytesNamingTheProblem) {
  const std::string good = encode_loader_state(sample());
  expect_refused("", "bad magic");
  expect_refused("ACCLDR03" + good.substr(8), "bad magic");
  expect_refused(good.substr(0, 12), "truncated (no epoch)");
  expect_refused(good.substr(0, good.size() - 1), "truncated (no epoch flag)");
  expect_refused(good + "x", "trailing bytes");
  expect_refused(with_int_at(good, 8, -1), "negative epoch");
  expect_refused(with_int_at(good, 16, -1), "negative epoch or position");
  expect_refused(with_int_at(good, 32, 0), "no generator state");
  expect_refused(with_int_at(good, 32, -5), "no generator state");
  expect_refused(with_int_at(good, 32, INT64_MAX), "truncated (no generator state)");
  expect_refused(with_int_at(good, good.size() - 8, 2), "epoch flag 2");
}

// Version 2 keeps the number of processes and the global batch, which a resume on another number of
// processes checks; version 1 states (without them) still load.
TEST(LoaderState, Version2KeepsTheProcessCountAndGlobalBatch) {
  LoaderState state = sample();
  state.world_size = 2;
  state.global_batch_size = 6;
  const std::string bytes = encode_loader_state(state);
  EXPECT_EQ(bytes.substr(0, 8), "ACCLDR02");
  EXPECT_EQ(bytes.size(), 8 + 6 * 8 + 12 + 8u);
  const LoaderState back = decode_loader_state(bytes);
  EXPECT_EQ(back.world_size, 2);
  EXPECT_EQ(back.global_batch_size, 6);
  EXPECT_EQ(back.yielded, 7);
  EXPECT_EQ(encode_loader_state(back), bytes);
  EXPECT_EQ(decode_loader_state(encode_loader_state(sample())).world_size, -1);

  state.global_batch_size = -1;  // explicit batches: no global batch of samples, but a known process count
  EXPECT_EQ(decode_loader_state(encode_loader_state(state)).global_batch_size, -1);
  expect_refused(with_int_at(bytes, 32, 0), "process count 0");
  expect_refused(with_int_at(bytes, 40, 0), "global batch 0");
  expect_refused(with_int_at(bytes, 40, -2), "global batch -2");
  expect_refused(bytes.substr(0, 36), "truncated (no process count)");
}

}  // namespace
}  // namespace accel::data
