#include "ckpt/model_weights.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ckpt/model_layout.hpp"
#include "ckpt/model_pieces.hpp"
#include "core/error.hpp"
#include "core/files.hpp"

namespace accel::ckpt {

namespace {

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.device() == b.device() && a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.scalar_type() == b.scalar_type();
}

// For each tensor, the index of the first one it is tied to: itself when it is the first or untied. A
// tensor without elements holds no memory to share (its address may be null for all of them); a parameter
// sharded by zero_stage 3 holds none either, and the model gives its slots one tensor object.
std::vector<size_t> tie_leaders(const NamedTensors& tensors) {
  std::vector<size_t> leaders(tensors.size());
  std::unordered_map<const void*, std::vector<size_t>> by_address;
  for (size_t i = 0; i < tensors.size(); ++i) {
    leaders[i] = i;
    const at::Tensor& tensor = tensors[i].second;
    if (tensor.numel() == 0) continue;
    const bool holds_memory = tensor.storage().nbytes() > 0;
    std::vector<size_t>& earlier =
        by_address[holds_memory ? tensor.data_ptr() : static_cast<const void*>(tensor.unsafeGetTensorImpl())];
    for (size_t j : earlier) {
      if (same_view(tensors[j].second, tensor)) {
        leaders[i] = j;
        break;
      }
    }
    if (leaders[i] == i) earlier.push_back(i);
  }
  return leaders;
}

}  // namespace

std::map<std::string, std::string> StoredModel::ties_to(const std::vector<std::string>& names) const {
  const std::set<std::string> held(names.begin(), names.end());
  std::map<std::string, std::string> metadata;
  for (const auto& [left_out, stored] : ties) {
    if (held.count(stored) != 0) metadata.emplace(left_out, stored);
  }
  return metadata;
}

StoredModel stored_model(const NamedTensors& own) {
  const std::vector<size_t> leaders = tie_leaders(own);
  StoredModel stored;
  for (size_t i = 0; i < own.size(); ++i) {
    if (leaders[i] == i) {
      stored.tensors.push_back(own[i]);
    } else {
      stored.ties.emplace(own[i].first, own[leaders[i]].first);
    }
  }
  return stored;
}

ModelPart model_part(const train::Model& model, int64_t rank, int64_t world) {
  const StoredModel stored = stored_model(model.tensor_slots());
  // Buffers may differ between ranks (a BatchNorm's statistics of each rank's batches): process 0's are the
  // model's, as in a whole file.
  std::unordered_set<const c10::TensorImpl*> buffers;
  for (const auto& [name, buffer] : model.named_buffers()) buffers.insert(buffer.unsafeGetTensorImpl());
  ModelPart part;
  part.metadata = stored.ties;
  for (const auto& [name, tensor] : stored.tensors) {
    int64_t begin = 0;
    at::Tensor piece;
    if (model.is_sharded(tensor)) {
      std::tie(begin, piece) = model.sharded_share(tensor);
      // Under hybrid sharding every node holds the same shares: the first node's ranks write them.
      if (model.zero_partition()->replica != 0) piece = piece.narrow(0, 0, 0);
    } else if (buffers.count(tensor.unsafeGetTensorImpl()) != 0) {
      piece = tensor.detach().reshape({-1}).narrow(0, 0, rank == 0 ? tensor.numel() : 0);
    } else {
      const auto [first, end] = even_piece(tensor.numel(), rank, world);
      begin = first;
      piece = tensor.detach().reshape({-1}).narrow(0, first, end - first);
    }
    part.metadata.insert(piece_entry(name, begin, begin + piece.numel(), tensor.sizes().vec()));
    part.pieces.emplace_back(name, piece);
  }
  return part;
}

ModelWeights::Stored ModelWeights::whole(const formats::ArrayView& view, const std::string& path) {
  return Stored{view.shape, view.dtype, {{0, &view}}, &path};
}

at::Tensor ModelWeights::value(const Stored& stored) {
  at::Tensor tensor = at::empty(stored.shape, at::TensorOptions().dtype(stored.dtype));
  copy_elements(stored, 0, tensor.view({-1}));
  return tensor;
}

void ModelWeights::copy_elements(const Stored& stored, int64_t begin, const at::Tensor& out) {
  const int64_t end = begin + out.numel();
  const auto element = static_cast<int64_t>(out.element_size());
  for (const auto& [first, view] : stored.pieces) {
    const int64_t last = first + static_cast<int64_t>(view->nbytes) / element;
    const int64_t from = std::max(begin, first), to = std::min(end, last);
    if (from >= to) continue;
    const auto* bytes = static_cast<const char*>(view->data) + (from - first) * element;
    // Mapped read-only: the copy reads it, nothing writes through the view.
    const at::Tensor source = at::from_blob(const_cast<char*>(bytes), {to - from}, at::TensorOptions().dtype(stored.dtype));
    out.narrow(0, from - begin, to - from).copy_(source);
  }
}

ModelWeights ModelWeights::from_parts(const train::Model& model, const std::string& directory, size_t index, int64_t world) {
  ModelWeights weights;
  std::vector<PartListing> listings;
  for (int64_t rank = 0; rank < world; ++rank) {
    weights.files_.push_back(std::make_unique<formats::SafetensorsFile>(model_part_file(directory, rank, index)));
    const formats::SafetensorsFile& part = *weights.files_.back();
    PartListing listing{part.file().path(), {}, part.metadata()};
    for (const formats::ArrayView& view : part.arrays()) {
      int64_t numel = 1;
      for (int64_t d : view.shape) numel *= d;
      listing.tensors.push_back({view.name, c10::toString(view.dtype), numel});
    }
    listings.push_back(std::move(listing));
  }
  const PiecedModel pieced = assemble_pieces(listings);
  StoredByName stored;
  for (size_t k = 0; k < pieced.tensors.size(); ++k) {
    const PiecedTensor& tensor = pieced.tensors[k];
    // assemble_pieces keeps part 0's order, which is its file's.
    const formats::ArrayView& in_first_part = weights.files_[0]->arrays()[k];
    const size_t holder = tensor.pieces.empty() ? 0 : tensor.pieces.front().part;
    Stored where{tensor.shape, in_first_part.dtype, {}, &weights.files_[holder]->file().path()};
    for (const PiecedTensor::Piece& piece : tensor.pieces) {
      where.pieces.emplace_back(piece.begin, &weights.files_[piece.part]->arrays()[piece.entry]);
    }
    stored.emplace_back(tensor.name, std::move(where));
  }
  weights.check_against(model, stored, model_part_file(directory, 0, index), pieced.ties);
  return weights;
}

ModelWeights ModelWeights::from_file(const train::Model& model, const std::string& path) {
  ModelWeights weights;
  weights.files_.push_back(std::make_unique<formats::SafetensorsFile>(path));
  StoredByName stored;
  for (const formats::ArrayView& view : weights.files_.back()->arrays()) {
    stored.emplace_back(view.name, whole(view, weights.files_.back()->file().path()));
  }
  weights.check_against(model, stored, path, weights.files_.back()->metadata());
  return weights;
}

ModelWeights ModelWeights::from_directory(const train::Model& model, const std::string& directory) {
  const std::string single = join_path(directory, kModelFile), index_path = join_path(directory, kModelIndex);
  const SavedModelFiles files = saved_model_files(directory);
  if (files == SavedModelFiles::None) {
    fail(Code::Io, "no saved model in '" + directory + "': neither " + kModelFile + " nor " + kModelIndex);
  }
  if (files == SavedModelFiles::Single) return from_file(model, single);

  const ModelIndex index = read_model_index(index_path);
  ModelWeights weights;
  StoredByName stored;
  std::map<std::string, std::string> metadata;
  for (const auto& [file, names] : index.tensors_by_file()) {
    const std::string path = join_path(directory, file);
    try {
      weights.files_.push_back(std::make_unique<formats::SafetensorsFile>(path));
    } catch (const Error& error) {
      if (error.code() != Code::Io) throw;
      fail(Code::Io, index_path + " maps '" + names.front() + "' to " + file + ", which cannot be read: " + error.what());
    }
    const formats::SafetensorsFile& shard = *weights.files_.back();
    std::vector<std::string> held;
    for (const formats::ArrayView& view : shard.arrays()) {
      held.push_back(view.name);
      stored.emplace_back(view.name, whole(view, shard.file().path()));
    }
    check_shard_holds_its_tensors(index, file, path, held);
    metadata.insert(shard.metadata().begin(), shard.metadata().end());
  }
  weights.check_against(model, stored, index_path, metadata);
  return weights;
}

void ModelWeights::check_against(const train::Model& model, const StoredByName& stored, const std::string& source,
                                 const std::map<std::string, std::string>& metadata) {
  const NamedTensors own = model.tensor_slots();
  std::unordered_map<std::string, size_t> own_index;
  for (size_t i = 0; i < own.size(); ++i) own_index.emplace(own[i].first, i);
  // `name` of the files loaded into the model's tensor `name_in_model`.
  const auto check_fits = [&](const std::string& name, const Stored& where, const std::string& name_in_model) {
    const at::Tensor& tensor = own[own_index.at(name_in_model)].second;
    const std::string what = "'" + name + "'" + (name == name_in_model ? "" : " (stored for '" + name_in_model + "')");
    if (where.shape != tensor.sizes().vec()) {
      fail(Code::InvalidArgument, *where.path + ": " + what + " has shape " + formats::shape_string(where.shape) +
                                      ", the model's is " + formats::shape_string(tensor.sizes().vec()));
    }
    if (where.dtype != tensor.scalar_type()) {
      fail(Code::InvalidArgument, *where.path + ": " + what + " is " + std::string(c10::toString(where.dtype)) +
                                      ", the model's is " + std::string(c10::toString(tensor.scalar_type())));
    }
  };
  std::vector<const Stored*> found(own.size(), nullptr);
  std::unordered_map<std::string, const Stored*> stored_by_name;
  for (const auto& [name, where] : stored) {
    const auto mine = own_index.find(name);
    if (mine == own_index.end()) fail(Code::InvalidArgument, *where.path + ": holds '" + name + "', which the model does not have");
    check_fits(name, where, name);
    found[mine->second] = &where;
    stored_by_name.emplace(name, &where);
  }
  // A name the files left out for the one they record it tied to: an untied model loads it from that one.
  for (const auto& [left_out, kept] : metadata) {
    const auto mine = own_index.find(left_out);
    const auto source_here = stored_by_name.find(kept);
    if (mine == own_index.end() || found[mine->second] != nullptr || source_here == stored_by_name.end()) continue;
    check_fits(kept, *source_here->second, left_out);
    found[mine->second] = source_here->second;
  }

  const std::vector<size_t> leaders = tie_leaders(own);
  std::vector<const Stored*> source_of(own.size(), nullptr);  // by leader: the bytes a tied group loads from
  for (size_t i = 0; i < own.size(); ++i) {
    const Stored* here = found[i];
    const Stored*& source_here = source_of[leaders[i]];
    if (here == nullptr) continue;
    if (source_here == nullptr) {
      source_here = here;
      copies_.emplace_back(i, *here);
    } else if (const at::Tensor a = value(*here), b = value(*source_here);
               std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(a.nbytes())) != 0) {
      fail(Code::InvalidArgument, *here->path + ": '" + own[i].first + "' is tied to '" + own[leaders[i]].first +
                                      "' in the model, but the files hold different values for them");
    }
  }
  for (size_t i = 0; i < own.size(); ++i) {
    if (source_of[leaders[i]] == nullptr) {
      fail(Code::InvalidArgument, source + ": no tensor '" + own[i].first + "', which the model has");
    }
  }
}

void ModelWeights::copy_into(const train::Model& model) const {
  const at::NoGradGuard no_grad;
  const NamedTensors own = model.tensor_slots();
  for (const auto& [index, stored] : copies_) {
    // Under zero_stage 3 a trainable parameter's values are this rank's share, in the model.
    if (model.is_sharded(own[index].second)) {
      model.assign_sharded(own[index].second,
                           [&](int64_t begin, const at::Tensor& share) { copy_elements(stored, begin, share); });
    } else {
      own[index].second.copy_(value(stored));
    }
  }
}

}  // namespace accel::ckpt
