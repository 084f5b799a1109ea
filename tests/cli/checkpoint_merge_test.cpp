// accel checkpoint merge's pieces (cli/checkpoint_merge.hpp): a model written in another tensor order, with a
// tie in its metadata, comes out as save_model writes a model held whole (each file in name order, the tie
// kept, byte for byte what the same tensors written whole give); an OUT holding a model and a damaged source
// are refused naming them; a checkpoint saved in pieces by several processes is joined into the same file, and
// pieces that do not fit together (a gap, another shape, no description, a missing part) are refused naming
// them; shard sizes read as Accelerate's.
#include "cli/checkpoint_merge.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <iterator>
#include <string>

#include "ckpt/manifest.hpp"
#include "ckpt/model_layout.hpp"
#include "ckpt/model_pieces.hpp"
#include "core/files.hpp"
#include "expect_error.hpp"
#include "formats/safetensors.hpp"
#include "temp_dir.hpp"

namespace accel::cli {
namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class CheckpointMerge : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::temp_directory() + "/accel_merge_" + std::to_string(::getpid());
    remove_all(root_);
    create_directories(root_ + "/source");
    at::manual_seed(0);
    tensors_ = {{"z.weight", at::randn({3, 4})}, {"a.bias", at::randn({5}, at::kDouble)}, {"m.table", at::randn({2, 2}).to(at::kBFloat16)}};
  }
  void TearDown() override { remove_all(root_); }

  // The tensors in another order than by name, written one at a time (as a stage 3 checkpoint writes them).
  void write_unit_ordered(const std::string& path, const std::map<std::string, std::string>& ties) {
    AtomicFile file(path);
    std::vector<formats::TensorHeader> entries;
    for (const auto& [name, tensor] : tensors_) entries.push_back(formats::header_of(name, tensor));
    formats::SafetensorsStream stream(file, entries, ties);
    for (const auto& entry : tensors_) stream.append(entry.second);
    stream.finish();
    file.commit();
  }

  std::string root_;
  NamedTensors tensors_;
};

TEST_F(CheckpointMerge, GivesTheFileOfTheTensorsWrittenWhole) {
  const std::map<std::string, std::string> ties{{"out.weight", "z.weight"}};
  write_unit_ordered(root_ + "/source/model.safetensors", ties);
  formats::write_safetensors(root_ + "/whole.safetensors", tensors_, ties);
  ASSERT_NE(bytes_of(root_ + "/source/model.safetensors"), bytes_of(root_ + "/whole.safetensors"));
  const auto written = merge_model({root_ + "/source", root_ + "/out"});
  EXPECT_EQ(written, std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(bytes_of(root_ + "/out/model.safetensors"), bytes_of(root_ + "/whole.safetensors"));

  // In shards of at most 64 bytes: z.weight (48 bytes) alone, then a.bias and m.table (40 and 8), and an index.
  MergeRequest sharded{root_ + "/source", root_ + "/shards"};
  sharded.max_shard_size = 64;
  EXPECT_EQ(merge_model(sharded).size(), 3u);
  const ckpt::ModelIndex index = ckpt::read_model_index(root_ + "/shards/" + ckpt::kModelIndex);
  EXPECT_EQ(index.total_size, 96u);
  EXPECT_EQ(index.weight_map.at("z.weight"), ckpt::shard_file(0, 2));
  EXPECT_EQ(index.weight_map.at("m.table"), ckpt::shard_file(1, 2));
  const formats::SafetensorsFile first(root_ + "/shards/" + ckpt::shard_file(0, 2));
  EXPECT_EQ(first.metadata().at("out.weight"), "z.weight") << "the tie goes with the tensor it stores";
  // Merging the shards back gives the single file again.
  merge_model({root_ + "/shards", root_ + "/again"});
  EXPECT_EQ(bytes_of(root_ + "/again/model.safetensors"), bytes_of(root_ + "/whole.safetensors"));
}

TEST_F(CheckpointMerge, RefusesAnOutputHoldingAModelAndADamagedSource) {
  write_unit_ordered(root_ + "/source/model.safetensors", {});
  merge_model({root_ + "/source", root_ + "/out"});
  const std::string before = bytes_of(root_ + "/out/model.safetensors");
  expect_error(Code::InvalidArgument, "holds a saved model already (model.safetensors)",
               [&] { merge_model({root_ + "/source", root_ + "/out"}); });
  EXPECT_EQ(bytes_of(root_ + "/out/model.safetensors"), before);
  const std::string full = bytes_of(root_ + "/source/model.safetensors");
  std::ofstream(root_ + "/source/model.safetensors", std::ios::binary | std::ios::trunc) << full.substr(0, full.size() - 4);
  expect_error(Code::InvalidArgument, "truncated", [&] { merge_model({root_ + "/source", root_ + "/other"}); });
  EXPECT_FALSE(path_exists(root_ + "/other")) << "a refused merge made its output folder";
  create_directories(root_ + "/empty");
  expect_error(Code::InvalidArgument, "is neither a checkpoint", [&] { merge_model({root_ + "/empty", root_ + "/x"}); });
  expect_error(Code::Io, "is not a directory", [&] { merge_model({root_ + "/missing", root_ + "/x"}); });
  // A folder with both entry points (a save interrupted and another kind made after) is refused as load_model
  // refuses it, rather than one of them read.
  MergeRequest sharded{root_ + "/out", root_ + "/both"};
  sharded.max_shard_size = 64;
  merge_model(sharded);
  merge_model({root_ + "/out", root_ + "/single"});
  std::ofstream(root_ + "/both/model.safetensors", std::ios::binary) << bytes_of(root_ + "/single/model.safetensors");
  expect_error(Code::InvalidArgument, "holds both model.safetensors and model.safetensors.index.json",
               [&] { merge_model({root_ + "/both", root_ + "/y"}); });
}

// A checkpoint saved in pieces (ckpt/model_pieces.hpp) by 3 processes: each part holds every tensor's piece.
class PiecesMerge : public CheckpointMerge {
 protected:
  // Each process's part as save_state writes it; `describe` may change a part's piece entries.
  void write_parts(const std::function<void(int64_t, std::map<std::string, std::string>&)>& describe = {}) {
    ckpt::Manifest manifest;
    manifest.world_size = 3;
    manifest.num_models = 1;
    manifest.models_in_pieces = {0};
    create_directories(root_ + "/pieces");
    ckpt::write_manifest(root_ + "/pieces/" + ckpt::kManifestFile, manifest);
    for (int64_t rank = 0; rank < 3; ++rank) {
      NamedTensors pieces;
      std::map<std::string, std::string> metadata{{"out.weight", "z.weight"}};
      for (const auto& [name, tensor] : tensors_) {
        const auto [begin, end] = ckpt::even_piece(tensor.numel(), rank, 3);
        pieces.emplace_back(name, tensor.reshape({-1}).narrow(0, begin, end - begin));
        metadata.insert(ckpt::piece_entry(name, begin, end, tensor.sizes().vec()));
      }
      if (describe) describe(rank, metadata);
      create_directories(root_ + "/pieces/rank" + std::to_string(rank));
      formats::write_safetensors(ckpt::model_part_file(root_ + "/pieces", rank, 0), pieces, metadata);
    }
  }
};

TEST_F(PiecesMerge, JoinsEveryProcesssPiecesIntoTheWholeFile) {
  write_parts();
  formats::write_safetensors(root_ + "/whole.safetensors", tensors_, {{"out.weight", "z.weight"}});
  EXPECT_EQ(merge_model({root_ + "/pieces", root_ + "/out"}), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(bytes_of(root_ + "/out/model.safetensors"), bytes_of(root_ + "/whole.safetensors"));
  // As Accelerate's merge is given a SHARDED_STATE_DICT checkpoint: its model's own folder.
  merge_model({root_ + "/pieces/pytorch_model_fsdp_0/", root_ + "/accelerate_style"});
  EXPECT_EQ(bytes_of(root_ + "/accelerate_style/model.safetensors"), bytes_of(root_ + "/whole.safetensors"));
  expect_error(Code::InvalidArgument, "holds 1 model(s), and model 1 was asked for",
               [&] { merge_model({root_ + "/pieces/pytorch_model_fsdp_1", root_ + "/second"}); });
}

TEST_F(PiecesMerge, RefusesPiecesThatDoNotFitTogether) {
  write_parts([](int64_t rank, std::map<std::string, std::string>& metadata) {
    if (rank == 1) metadata.at("accel.piece:z.weight") = "5 9 3 4";  // 4 elements, but where rank 0's end is 4
  });
  expect_error(Code::InvalidArgument, "starts at element 5, where 4 was expected",
               [&] { merge_model({root_ + "/pieces", root_ + "/gap"}); });
  write_parts([](int64_t rank, std::map<std::string, std::string>& metadata) {
    if (rank == 2) metadata.at("accel.piece:z.weight") = "8 12 4 3";
  });
  expect_error(Code::InvalidArgument, "'z.weight' is F32 [4, 3] here and F32 [3, 4] in",
               [&] { merge_model({root_ + "/pieces", root_ + "/shape"}); });
  write_parts([](int64_t rank, std::map<std::string, std::string>& metadata) {
    if (rank == 0) metadata.erase("accel.piece:a.bias");
  });
  expect_error(Code::InvalidArgument, "'a.bias' has no piece description",
               [&] { merge_model({root_ + "/pieces", root_ + "/undescribed"}); });
  write_parts();
  remove_all(ckpt::model_part_file(root_ + "/pieces", 2, 0));
  expect_error(Code::Io, "rank2/model.safetensors", [&] { merge_model({root_ + "/pieces", root_ + "/missing"}); });
  EXPECT_FALSE(path_exists(root_ + "/missing"));
}

TEST(ShardSize, ReadsAccelerateSizes) {
  EXPECT_EQ(parse_shard_size("10GB"), 10'000'000'000u);
  EXPECT_EQ(parse_shard_size("500MiB"), 500u << 20);
  EXPECT_EQ(parse_shard_size("2000"), 2000u);
  EXPECT_EQ(parse_shard_size("5kb"), 5000u);
  for (const char* bad : {"", "GB", "0", "10 GB", "12XB", "-5"}) {
    expect_error(Code::InvalidArgument, "is not a shard size", [&] { parse_shard_size(bad); });
  }
}

}  // namespace
}  // namespace accel::cli
