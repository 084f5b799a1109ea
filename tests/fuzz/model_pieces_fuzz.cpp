// The pieces of a model saved by several processes (ckpt/model_pieces.hpp) on arbitrary part files, read as
// `accel checkpoint merge` reads them: the input is two parts, the first 4 bytes giving the first one's length.
// An accel::Error is a refusal, which is fine; a crash, a sanitizer report or any other exception is a finding.
// What assemble_pieces accepts must keep its promises: each tensor's pieces name a listed entry of the right
// name, lie in element order and cover its elements exactly once.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/model_pieces.hpp"
#include "core/error.hpp"
#include "formats/header.hpp"
#include "formats/safetensors_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t first = 0;
  std::memcpy(&first, data, 4);
  const size_t split = 4 + std::min<size_t>(first, size - 4);
  const std::vector<std::pair<const uint8_t*, size_t>> files{{data + 4, split - 4}, {data + split, size - split}};
  std::vector<accel::ckpt::PartListing> parts;
  accel::ckpt::PiecedModel model;
  try {
    for (size_t p = 0; p < files.size(); ++p) {
      const std::string path = "rank" + std::to_string(p) + "/model.safetensors";
      const auto header = accel::formats::parse_safetensors_header(files[p].first, files[p].second, path);
      accel::ckpt::PartListing listing{path, {}, header.metadata};
      for (const auto& entry : header.entries) {
        const std::optional<size_t> numel = accel::formats::array_nbytes(entry.shape, 1);
        if (!numel || *numel > static_cast<size_t>(INT64_MAX)) return 0;  // merge refuses it (checkpoint_merge.cpp)
        listing.tensors.push_back({entry.name, entry.dtype, static_cast<int64_t>(*numel)});
      }
      parts.push_back(std::move(listing));
    }
    model = accel::ckpt::assemble_pieces(parts);
  } catch (const accel::Error&) {
    return 0;
  }
  for (const auto& tensor : model.tensors) {
    int64_t numel = 1;
    for (int64_t d : tensor.shape) numel *= d;
    int64_t covered = 0;
    for (const auto& piece : tensor.pieces) {
      if (piece.part >= parts.size() || piece.entry >= parts[piece.part].tensors.size()) __builtin_trap();
      const auto& listed = parts[piece.part].tensors[piece.entry];
      if (listed.name != tensor.name || listed.numel != piece.end - piece.begin) __builtin_trap();
      if (piece.begin != covered || piece.end <= piece.begin) __builtin_trap();
      covered = piece.end;
    }
    if (covered != numel) __builtin_trap();
  }
  return 0;
}
