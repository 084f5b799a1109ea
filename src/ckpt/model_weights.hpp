// A model's weights in safetensors files: which tensors are stored, and reading them back checked
// against the model. save_model and save_state store a model the same way, and load_model and
// load_state read it back through the same checks.
//
// Tied weights (an embedding and an output layer holding one matrix) are stored once, as Accelerate and
// transformers store them, since safetensors has no aliasing: of the tensors that are the very same view
// of the same memory (same device, address, shape, strides, dtype), only the first in the model's order
// (parameters, then buffers) is written, under its name, and each name left out is recorded in the
// __metadata__ of the file holding the stored one, {left out: stored}, as safetensors' save_model records
// it. Loading fills a tied tensor through the stored one; a model whose tensors are not tied (an untied
// copy) loads a name left out from the stored one its file's metadata names. Tensors that merely overlap
// are stored each on its own: their bytes are the same memory, so loading writes back the same values.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/named_tensors.hpp"
#include "formats/safetensors.hpp"
#include "train/model/model.hpp"

namespace accel::ckpt {

// What a model's files hold: its parameters and buffers, each tied group under its first name, and the
// ties, each name left out -> the name stored for it.
struct StoredModel {
  NamedTensors tensors;
  std::map<std::string, std::string> ties;

  // The metadata of a file holding these of the tensors' names: the ties to them.
  std::map<std::string, std::string> ties_to(const std::vector<std::string>& names) const;
};
// own: a model's slots (train::Model::tensor_slots).
StoredModel stored_model(const NamedTensors& own);

// This process's part of a model saved in pieces (ckpt/model_pieces.hpp): each stored tensor's piece, 1-d
// (under zero_stage 3 a sharded parameter's share as the optimizer holds it, a buffer whole on process 0 and
// empty elsewhere, any other tensor an even split of its elements; views of the model's memory: copy them
// before it changes), and the metadata describing them, with the ties.
struct ModelPart {
  NamedTensors pieces;
  std::map<std::string, std::string> metadata;
};
ModelPart model_part(const train::Model& model, int64_t rank, int64_t world);

// Weights read from files and checked against a model: every tensor of the model has its bytes (a tied
// one through the name stored), with the model's shape and dtype; no file holds a tensor the model lacks.
// Nothing in the model changes until copy_into. The files stay mapped while this object lives, so
// copy_into reads them once, a tensor at a time.
class ModelWeights {
 public:
  // Every tensor of one file (a checkpoint's model.safetensors). Error(Io) when it cannot be read;
  // Error(Dtype) or Error(InvalidArgument) naming the file when it is damaged or does not fit the model.
  static ModelWeights from_file(const train::Model& model, const std::string& path);
  // What save_model wrote into directory: model.safetensors, or the index and every shard it names, each
  // shard holding exactly the tensors the index maps to it. As from_file, naming the index or the shard;
  // Error(Io) also when the directory holds neither model.safetensors nor an index, and
  // Error(InvalidArgument) when it holds both (no save leaves both).
  static ModelWeights from_directory(const train::Model& model, const std::string& directory);
  // Model `index` of a checkpoint saved in pieces by `world` processes (ckpt/model_pieces.hpp): every part
  // file, their pieces assembled (assemble_pieces' errors), then checked as from_file; Error(Io) naming a
  // part that cannot be read. copy_into puts each tensor together from its pieces, one tensor at a time.
  static ModelWeights from_parts(const train::Model& model, const std::string& directory, size_t index, int64_t world);

  // Copies the weights into the model's tensors, on whatever device each is, without recording gradients.
  void copy_into(const train::Model& model) const;

 private:
  // A tensor of the files: its shape and dtype, the views of its bytes (one for a tensor stored whole; a
  // saved piece each, with its first element, for one saved in pieces) and a file that holds it, for messages.
  struct Stored {
    std::vector<int64_t> shape;
    at::ScalarType dtype = at::kFloat;
    std::vector<std::pair<int64_t, const formats::ArrayView*>> pieces;
    const std::string* path = nullptr;
  };
  static Stored whole(const formats::ArrayView& view, const std::string& path);
  // The tensor's values, put together from its pieces; and its flattened elements [begin, begin + numel) of
  // `out` (1-d, on any device), read from the pieces that hold them only.
  static at::Tensor value(const Stored& stored);
  static void copy_elements(const Stored& stored, int64_t begin, const at::Tensor& out);
  using StoredByName = std::vector<std::pair<std::string, Stored>>;

  ModelWeights() = default;
  // Fills copies_, or throws naming the file of a mismatch; `source` (a file, or the index) is named
  // for a tensor of the model that no file holds. `metadata`: the files' __metadata__ entries, where the
  // ties recorded are found.
  void check_against(const train::Model& model, const StoredByName& stored, const std::string& source,
                     const std::map<std::string, std::string>& metadata);

  std::vector<std::unique_ptr<formats::SafetensorsFile>> files_;
  std::vector<std::pair<size_t, Stored>> copies_;  // index in tensor_slots <- its values
};

}  // namespace accel::ckpt
