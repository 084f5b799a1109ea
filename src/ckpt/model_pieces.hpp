// A model saved in pieces (prepare option checkpoint_model "sharded", FSDP's SHARDED_STATE_DICT): each saving
// process writes, in parallel and with no collective, rank<r>/<the model's file name> holding every tensor of
// the model as the piece of its flattened elements that process keeps (under zero_stage 3 its share of a
// sharded parameter; a buffer, which ranks may hold apart, process 0's; otherwise an even split of the
// elements; a piece may be empty), each described in the file's __metadata__. Together the pieces cover every tensor exactly once, so any number of processes at
// any stage loads them (ckpt/model_weights.hpp), and `accel checkpoint merge` joins them into one file.
// Free of LibTorch: the CLI reads pieces too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace accel::ckpt {

// The part file of process `rank` for model `model` in a checkpoint directory.
std::string model_part_file(const std::string& directory, int64_t rank, size_t model);

// The __metadata__ entry describing a part file's piece of tensor `name`: elements [begin, end) of the
// tensor of `shape`, flattened.
std::pair<std::string, std::string> piece_entry(const std::string& name, int64_t begin, int64_t end,
                                                const std::vector<int64_t>& shape);

// [begin, end) of process `rank`'s piece when `numel` elements are split evenly over `world` processes (the
// first numel % world processes one element more): a tensor that is not sharded.
std::pair<int64_t, int64_t> even_piece(int64_t numel, int64_t rank, int64_t world);

// One part file as its header lists it.
struct PartListing {
  std::string path;
  struct Tensor {
    std::string name;
    std::string dtype;  // compared between parts only, so any spelling of the reader's
    int64_t numel = 0;
  };
  std::vector<Tensor> tensors;  // file order
  std::map<std::string, std::string> metadata;
};

// A tensor put together from the parts.
struct PiecedTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  struct Piece {
    size_t part = 0;   // in the listings given
    size_t entry = 0;  // in that part's tensors
    int64_t begin = 0;
    int64_t end = 0;
  };
  std::vector<Piece> pieces;  // the non-empty ones, in element order, covering [0, numel) once
};

struct PiecedModel {
  std::vector<PiecedTensor> tensors;        // in the first part's order
  std::map<std::string, std::string> ties;  // name left out -> name stored, as a whole model file records them
};

// Every part must list the same tensors, each described ("accel.piece:<name>" in its metadata) with one shape
// and dtype in every part, a piece of end - begin elements, and the pieces of a tensor must cover its elements
// exactly once. Error(InvalidArgument) naming the file (and the tensor) otherwise; no parts is an error too.
PiecedModel assemble_pieces(const std::vector<PartListing>& parts);

}  // namespace accel::ckpt
