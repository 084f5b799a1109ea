#include "ckpt/model_pieces.hpp"

#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "ckpt/manifest.hpp"
#include "core/error.hpp"
#include "formats/header.hpp"

namespace accel::ckpt {

namespace {

constexpr const char* kPiecePrefix = "accel.piece:";

struct Description {
  int64_t begin = 0;
  int64_t end = 0;
  std::vector<int64_t> shape;
};

Description describe(const PartListing& part, const PartListing::Tensor& tensor) {
  const auto found = part.metadata.find(kPiecePrefix + tensor.name);
  if (found == part.metadata.end()) {
    fail(Code::InvalidArgument, part.path + ": '" + tensor.name + "' has no piece description (" + kPiecePrefix +
                                    tensor.name + " in __metadata__): not a part of a model saved in pieces");
  }
  std::istringstream text(found->second);
  Description description;
  int64_t dimension = 0;
  const bool read = static_cast<bool>(text >> description.begin >> description.end);
  while (read && text >> dimension) description.shape.push_back(dimension);
  int64_t numel = 1;
  bool sizes_fit = read && text.eof();
  for (int64_t d : description.shape) {
    sizes_fit = sizes_fit && d >= 0 && (d == 0 || numel <= INT64_MAX / d);
    if (sizes_fit) numel *= d;
  }
  if (!sizes_fit || description.begin < 0 || description.begin > description.end || description.end > numel) {
    fail(Code::InvalidArgument, part.path + ": the piece description of '" + tensor.name + "' (\"" + found->second +
                                    "\") is not \"<begin> <end> <shape...>\" within the tensor");
  }
  if (tensor.numel != description.end - description.begin) {
    fail(Code::InvalidArgument, part.path + ": the piece of '" + tensor.name + "' holds " + std::to_string(tensor.numel) +
                                    " elements, its description says " + std::to_string(description.end - description.begin));
  }
  return description;
}

}  // namespace

std::string model_part_file(const std::string& directory, int64_t rank, size_t model) {
  return rank_file(directory, rank, checkpoint_model_file(model));
}

std::pair<std::string, std::string> piece_entry(const std::string& name, int64_t begin, int64_t end,
                                                const std::vector<int64_t>& shape) {
  std::string value = std::to_string(begin) + " " + std::to_string(end);
  for (int64_t d : shape) value += " " + std::to_string(d);
  return {kPiecePrefix + name, value};
}

std::pair<int64_t, int64_t> even_piece(int64_t numel, int64_t rank, int64_t world) {
  const int64_t base = numel / world, extra = numel % world;
  const int64_t begin = rank * base + std::min(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

PiecedModel assemble_pieces(const std::vector<PartListing>& parts) {
  if (parts.empty()) fail(Code::InvalidArgument, "a model saved in pieces needs at least one part");
  PiecedModel model;
  std::unordered_map<std::string, size_t> index;
  for (const PartListing::Tensor& tensor : parts[0].tensors) {
    if (!index.emplace(tensor.name, model.tensors.size()).second) {
      fail(Code::InvalidArgument, parts[0].path + ": '" + tensor.name + "' is listed twice");
    }
    PiecedTensor pieced;
    pieced.name = tensor.name;
    pieced.dtype = tensor.dtype;
    pieced.shape = describe(parts[0], tensor).shape;
    model.tensors.push_back(std::move(pieced));
  }
  for (size_t p = 0; p < parts.size(); ++p) {
    const PartListing& part = parts[p];
    if (part.tensors.size() != model.tensors.size()) {
      fail(Code::InvalidArgument, part.path + ": lists " + std::to_string(part.tensors.size()) + " tensors, " +
                                      parts[0].path + " lists " + std::to_string(model.tensors.size()));
    }
    for (size_t e = 0; e < part.tensors.size(); ++e) {
      const PartListing::Tensor& tensor = part.tensors[e];
      const auto found = index.find(tensor.name);
      if (found == index.end()) {
        fail(Code::InvalidArgument, part.path + ": holds '" + tensor.name + "', which " + parts[0].path + " does not list");
      }
      PiecedTensor& pieced = model.tensors[found->second];
      const Description description = describe(part, tensor);
      if (description.shape != pieced.shape || tensor.dtype != pieced.dtype) {
        fail(Code::InvalidArgument, part.path + ": '" + tensor.name + "' is " + tensor.dtype + " " +
                                        formats::shape_string(description.shape) + " here and " + pieced.dtype + " " +
                                        formats::shape_string(pieced.shape) + " in " + parts[0].path);
      }
      if (description.end > description.begin) pieced.pieces.push_back({p, e, description.begin, description.end});
    }
  }
  for (PiecedTensor& pieced : model.tensors) {
    std::sort(pieced.pieces.begin(), pieced.pieces.end(),
              [](const PiecedTensor::Piece& a, const PiecedTensor::Piece& b) { return a.begin < b.begin; });
    int64_t numel = 1;
    for (int64_t d : pieced.shape) numel *= d;
    int64_t covered = 0;
    for (const PiecedTensor::Piece& piece : pieced.pieces) {
      if (piece.begin != covered) {
        fail(Code::InvalidArgument, parts[piece.part].path + ": the piece of '" + pieced.name + "' starts at element " +
                                        std::to_string(piece.begin) + ", where " + std::to_string(covered) +
                                        " was expected (the parts' pieces overlap or leave a gap)");
      }
      covered = piece.end;
    }
    if (covered != numel) {
      fail(Code::InvalidArgument, "'" + pieced.name + "': the parts' pieces cover " + std::to_string(covered) + " of its " +
                                      std::to_string(numel) + " elements (is a part missing? " + parts.back().path + " is the last)");
    }
  }
  for (const PartListing& part : parts) {
    for (const auto& [key, value] : part.metadata) {
      if (key.rfind(kPiecePrefix, 0) == 0 || index.count(key) != 0 || index.count(value) == 0) continue;
      model.ties.emplace(key, value);
    }
  }
  return model;
}

}  // namespace accel::ckpt
