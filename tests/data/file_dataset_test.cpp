// Datasets over memory-mapped .npy and .safetensors files, through the C ABI on one process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "accel.h"

namespace {

std::string last_error() { return accel_error_last(); }

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "accel_file_dataset_" + std::to_string(getpid()) + "_" + name;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// A version 1.0 .npy file: magic, version, header length, then the header dict padded to 64 bytes.
std::string npy(const std::string& descr, const std::string& shape, const std::string& payload) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const auto length = static_cast<uint16_t>(header.size());
  return std::string("\x93NUMPY\x01\x00", 8) + std::string(reinterpret_cast<const char*>(&length), 2) + header + payload;
}

std::string safetensors(const std::string& json, const std::string& payload) {
  const uint64_t length = json.size();
  return std::string(reinterpret_cast<const char*>(&length), 8) + json + payload;
}

std::vector<accel_batch_t*> all_batches(accel_loader_t* loader) {
  std::vector<accel_batch_t*> batches;
  for (;;) {
    accel_batch_t* batch = nullptr;
    EXPECT_EQ(accel_loader_next(loader, &batch), ACCEL_OK) << last_error();
    if (batch == nullptr) return batches;
    batches.push_back(batch);
  }
}

template <class T>
std::vector<T> field(const accel_batch_t* batch, const char* name) {
  accel_tensor_t* tensor = nullptr;
  EXPECT_EQ(accel_batch_get(batch, name, &tensor), ACCEL_OK) << last_error();
  std::vector<T> values(static_cast<size_t>(accel_tensor_numel(tensor)));
  EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, values.data(), values.size() * sizeof(T)), ACCEL_OK);
  accel_tensor_free(tensor);
  return values;
}

class FileDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(accel_state_new(&state, nullptr), ACCEL_OK) << last_error(); }
  void TearDown() override {
    accel_state_free(state);
    for (const auto& path : paths) std::remove(path.c_str());
  }
  std::string file(const std::string& name, const std::string& bytes) {
    paths.push_back(temp_path(name));
    write_file(paths.back(), bytes);
    return paths.back();
  }
  accel_loader_t* loader_over(accel_dataset_t* dataset, int64_t batch_size) {
    accel_options_t* options = nullptr;
    EXPECT_EQ(accel_options_new(&options), ACCEL_OK);
    EXPECT_EQ(accel_options_set_int(options, "batch_size", batch_size), ACCEL_OK);
    accel_loader_t* loader = nullptr;
    EXPECT_EQ(accel_loader_new(&loader, state, dataset, options), ACCEL_OK) << last_error();
    accel_options_free(options);
    return loader;
  }

  accel_state_t* state = nullptr;
  std::vector<std::string> paths;
};

TEST_F(FileDatasetTest, NpyFilesAreFieldsOfOneDataset) {
  const std::string x = file("x.npy", npy("<f4", "(3, 2)", raw(std::vector<float>{0, 1, 10, 11, 20, 21})));
  const std::string y = file("y.npy", npy("<i8", "(3,)", raw(std::vector<int64_t>{7, 8, 9})));
  const char* names[] = {"x", "y"};
  const char* files[] = {x.c_str(), y.c_str()};
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_npy(&dataset, names, files, 2), ACCEL_OK) << last_error();
  EXPECT_EQ(accel_dataset_length(dataset), 3);
  accel_loader_t* loader = loader_over(dataset, 2);
  auto batches = all_batches(loader);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(field<float>(batches[0], "x"), (std::vector<float>{0, 1, 10, 11}));
  EXPECT_EQ(field<int64_t>(batches[1], "y"), (std::vector<int64_t>{9}));
  for (auto* batch : batches) accel_batch_free(batch);
  accel_loader_free(loader);
  accel_dataset_free(dataset);
}

TEST_F(FileDatasetTest, SafetensorsTensorsAreFields) {
  const std::string json =
      "{\"labels\":{\"dtype\":\"I64\",\"shape\":[4],\"data_offsets\":[0,32]},"
      "\"pixels\":{\"dtype\":\"F32\",\"shape\":[4,1],\"data_offsets\":[32,48]}}";
  const std::string payload = raw(std::vector<int64_t>{0, 1, 2, 3}) + raw(std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f});
  const std::string path = file("data.safetensors", safetensors(json, payload));
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_safetensors(&dataset, path.c_str()), ACCEL_OK) << last_error();
  accel_loader_t* loader = loader_over(dataset, 3);
  auto batches = all_batches(loader);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(field<int64_t>(batches[0], "labels"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(field<float>(batches[1], "pixels"), (std::vector<float>{3.5f}));
  for (auto* batch : batches) accel_batch_free(batch);
  accel_loader_free(loader);
  accel_dataset_free(dataset);
}

// A field with zero-width rows ([4, 0]) has no bytes to copy: the copy of its rows had no pointers to
// copy from or into either (memcpy of nothing from NULL: undefined behaviour, reported by UBSan).
TEST_F(FileDatasetTest, ZeroWidthFieldsGiveEmptyRows) {
  const std::string empty = file("empty_rows.npy", npy("<f4", "(4, 0)", ""));
  const std::string y = file("y_rows.npy", npy("<i8", "(4,)", raw(std::vector<int64_t>{7, 8, 9, 10})));
  const char* names[] = {"empty", "y"};
  const char* files[] = {empty.c_str(), y.c_str()};
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_npy(&dataset, names, files, 2), ACCEL_OK) << last_error();
  accel_loader_t* loader = loader_over(dataset, 3);
  auto batches = all_batches(loader);
  ASSERT_EQ(batches.size(), 2u);
  accel_tensor_t* rows = nullptr;
  ASSERT_EQ(accel_batch_get(batches[0], "empty", &rows), ACCEL_OK) << last_error();
  ASSERT_EQ(accel_tensor_ndim(rows), 2u);
  EXPECT_EQ(accel_tensor_shape(rows)[0], 3);
  EXPECT_EQ(accel_tensor_shape(rows)[1], 0);
  accel_tensor_free(rows);
  EXPECT_EQ(field<int64_t>(batches[1], "y"), (std::vector<int64_t>{10}));
  for (auto* batch : batches) accel_batch_free(batch);
  accel_loader_free(loader);
  accel_dataset_free(dataset);
}

// Another process truncating a mapped file under the dataset: reading the lost rows raised SIGBUS, which
// killed the process. It is an I/O error naming the file, and the rows still there still read.
TEST_F(FileDatasetTest, AFileTruncatedWhileMappedFailsTheBatchNotTheProcess) {
  constexpr size_t kRows = 64, kRowFloats = 1024;  // 4 KiB a row: the rows span 64 pages
  std::vector<float> values(kRows * kRowFloats);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i / kRowFloats);
  const std::string path = file("shrinking.npy", npy("<f4", "(64, 1024)", raw(values)));
  const char* names[] = {"x"};
  const char* files[] = {path.c_str()};
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_npy(&dataset, names, files, 1), ACCEL_OK) << last_error();
  ASSERT_EQ(::truncate(path.c_str(), 64 + 8 * 4096), 0);  // the header and the first 8 rows remain
  accel_loader_t* loader = loader_over(dataset, 4);
  accel_batch_t* batch = nullptr;
  ASSERT_EQ(accel_loader_next(loader, &batch), ACCEL_OK) << last_error();  // rows 0-3
  EXPECT_EQ(field<float>(batch, "x")[kRowFloats * 3], 3.0f);
  accel_batch_free(batch);
  ASSERT_EQ(accel_loader_next(loader, &batch), ACCEL_OK) << last_error();  // rows 4-7
  accel_batch_free(batch);
  EXPECT_EQ(accel_loader_next(loader, &batch), ACCEL_ERR_IO);  // rows 8-11 are gone
  EXPECT_EQ(batch, nullptr);
  EXPECT_NE(last_error().find(path + ": the file was truncated while mapped"), std::string::npos) << last_error();
  accel_loader_free(loader);
  accel_dataset_free(dataset);
}

TEST_F(FileDatasetTest, BadFilesGiveErrorsNamingTheFile) {
  accel_dataset_t* dataset = nullptr;
  const std::string missing = temp_path("missing.safetensors");
  EXPECT_EQ(accel_dataset_from_safetensors(&dataset, missing.c_str()), ACCEL_ERR_IO);
  EXPECT_NE(last_error().find(missing), std::string::npos) << last_error();
  const std::string full = npy("<f4", "(4,)", raw(std::vector<float>{1, 2, 3, 4}));
  const std::string truncated = file("truncated.npy", full.substr(0, full.size() - 3));
  const char* names[] = {"x"};
  const char* files[] = {truncated.c_str()};
  EXPECT_EQ(accel_dataset_from_npy(&dataset, names, files, 1), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("truncated.npy"), std::string::npos) << last_error();
  const std::string corrupt = file("corrupt.safetensors", safetensors("{\"x\":{\"dtype\":", "abcd"));
  EXPECT_EQ(accel_dataset_from_safetensors(&dataset, corrupt.c_str()), ACCEL_ERR_INVALID_ARGUMENT);
  const std::string a = file("a.npy", npy("<f4", "(2,)", raw(std::vector<float>{1, 2})));
  const std::string b = file("b.npy", npy("<f4", "(3,)", raw(std::vector<float>{1, 2, 3})));
  const char* two_names[] = {"a", "b"};
  const char* two_files[] = {a.c_str(), b.c_str()};
  EXPECT_EQ(accel_dataset_from_npy(&dataset, two_names, two_files, 2), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'b' has 3"), std::string::npos) << last_error();
  EXPECT_EQ(dataset, nullptr);
}

int no_epoch(int64_t, void*) { return 0; }
int failing_item(accel_sample_t*, int*, void*) { return 9; }

TEST_F(FileDatasetTest, IterableCallbackFailureAndShuffleAreReported) {
  accel_dataset_t* dataset = nullptr;
  ASSERT_EQ(accel_dataset_from_iterable(&dataset, no_epoch, failing_item, nullptr), ACCEL_OK);
  EXPECT_EQ(accel_dataset_length(dataset), -1);
  accel_loader_t* loader = loader_over(dataset, 2);
  accel_batch_t* batch = nullptr;
  EXPECT_EQ(accel_loader_next(loader, &batch), ACCEL_ERR_CALLBACK);
  EXPECT_NE(last_error().find("next_item returned 9 for item 0"), std::string::npos) << last_error();
  accel_loader_free(loader);
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_bool(options, "shuffle", 1), ACCEL_OK);
  EXPECT_EQ(accel_loader_new(&loader, state, dataset, options), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("shuffle"), std::string::npos);
  accel_options_free(options);
  accel_dataset_free(dataset);
}

}  // namespace
