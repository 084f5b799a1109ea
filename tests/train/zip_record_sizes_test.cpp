#include "train/torchscript/zip_record_sizes.hpp"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/istream_adapter.h>
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>

namespace accel::train {
namespace {

// An archive as LibTorch writes one: "stored" uncompressed, "deflated" compressed (a kilobyte of zeros).
std::string archive() {
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  const std::string stored = "twelve bytes", zeros(1024, '\0');
  writer.writeRecord("stored", stored.data(), stored.size());
  writer.writeRecord("deflated", zeros.data(), zeros.size(), /*compress=*/true);
  writer.writeEndOfFile();
  return bytes;
}

std::optional<std::string> check(const std::string& bytes) {
  std::istringstream stream(bytes);
  caffe2::serialize::IStreamAdapter adapter(&stream);
  return oversized_zip_record(adapter);
}

// The uncompressed size field of `record`'s central directory entry (its compressed size field 4 bytes before:
// field_at 20).
void claim(std::string& bytes, const std::string& record, uint32_t size, size_t field_at = 24) {
  for (size_t at = bytes.find("PK\x01\x02"); at != std::string::npos; at = bytes.find("PK\x01\x02", at + 4)) {
    uint16_t name_size = 0;
    std::memcpy(&name_size, bytes.data() + at + 28, 2);
    const std::string name = bytes.substr(at + 46, name_size);
    if (name.size() >= record.size() && name.compare(name.size() - record.size(), record.size(), record) == 0) {
      std::memcpy(bytes.data() + at + field_at, &size, 4);
      return;
    }
  }
  FAIL() << "no directory entry for " << record;
}

TEST(ZipRecordSizes, AnArchiveAsWrittenIsAccepted) { EXPECT_EQ(check(archive()), std::nullopt); }

// A 6 KB archive whose directory said a 350-byte deflated record held 1.6 GB made LibTorch allocate it.
TEST(ZipRecordSizes, SizesTheCompressedBytesCannotGiveAreFound) {
  std::string bytes = archive();
  claim(bytes, "/deflated", 1644167664);
  ASSERT_TRUE(check(bytes).has_value());
  EXPECT_NE(check(bytes)->find("deflated' claims 1644167664 bytes from "), std::string::npos) << *check(bytes);
  bytes = archive();
  claim(bytes, "/stored", 13);
  EXPECT_NE(check(bytes).value_or("").find("stored' claims 13 bytes from 12 stored bytes"), std::string::npos);
}

// A 6 KB archive whose directory said a deflated record of 4 MB compressed bytes (so within deflate's
// expansion) held 4 GB made LibTorch allocate them (fuzz_model_load:
// tests/fuzz/corpus/model_load/compressed_beyond_the_end.pt).
TEST(ZipRecordSizes, CompressedBytesBeyondTheArchiveAreFound) {
  std::string bytes = archive();
  claim(bytes, "/deflated", 4u << 20, 20);
  claim(bytes, "/deflated", 4000000000u);
  EXPECT_NE(check(bytes).value_or("").find("deflated' claims 4194304 compressed bytes in an archive of "),
            std::string::npos) << check(bytes).value_or("nothing found");
}

// LibTorch's reader takes the directory that the zip64 end record names whenever there is one: a fuzzed digit
// in the end record's directory offset hid a record claiming 4 GB from a check that read that directory only
// (fuzz_model_load: tests/fuzz/corpus/model_load/zip64_directory_only.pt).
TEST(ZipRecordSizes, TheZip64EndRecordsDirectoryIsCheckedToo) {
  std::string bytes = archive();
  ASSERT_NE(bytes.rfind("PK\x06\x07"), std::string::npos) << "LibTorch wrote no zip64 locator";
  claim(bytes, "/deflated", 4000000000u);
  const uint32_t nowhere = 167825505;
  std::memcpy(bytes.data() + bytes.rfind("PK\x05\x06") + 16, &nowhere, 4);
  EXPECT_NE(check(bytes).value_or("").find("deflated' claims 4000000000 bytes from "), std::string::npos)
      << check(bytes).value_or("nothing found");
}

// A method the reader cannot inflate: it would allocate the claimed size before finding so.
TEST(ZipRecordSizes, AMethodTheReaderCannotInflateIsFound) {
  std::string bytes = archive();
  claim(bytes, "/deflated", 4000000000u);
  const size_t entry = bytes.find("PK\x01\x02", bytes.find("PK\x01\x02") + 4);  // the second: "deflated"
  const uint16_t bzip2 = 12;
  std::memcpy(bytes.data() + entry + 10, &bzip2, 2);
  EXPECT_NE(check(bytes).value_or("").find("deflated' is compressed by method 12"), std::string::npos)
      << check(bytes).value_or("nothing found");
}

// What is not a zip archive is left to LibTorch's reader to refuse.
TEST(ZipRecordSizes, WhatIsNoArchiveIsLeftToTheReader) {
  EXPECT_EQ(check("not a zip"), std::nullopt);
  EXPECT_EQ(check(archive().substr(0, 100)), std::nullopt);
}

}  // namespace
}  // namespace accel::train
