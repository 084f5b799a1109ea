#include "cli/checkpoint_merge.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "ckpt/manifest.hpp"
#include "ckpt/model_layout.hpp"
#include "ckpt/model_pieces.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "formats/header.hpp"
#include "formats/mapped_file.hpp"
#include "formats/safetensors_header.hpp"

namespace accel::cli {

namespace {

struct SourceTensor {
  formats::HeaderEntry entry;
  // Its bytes in Source::files, in order: one span for a tensor stored whole, a piece each for one saved in
  // pieces (ckpt/model_pieces.hpp).
  std::vector<std::pair<const unsigned char*, uint64_t>> spans;
};

struct Source {
  std::vector<formats::MappedFile> files;
  std::vector<SourceTensor> tensors;        // in the input's order: file by file, each in payload order
  std::map<std::string, std::string> ties;  // name left out -> name stored
};

// A checkpoint's manifest, checked to hold the model asked for; none for a saved model's directory.
std::optional<ckpt::Manifest> checkpoint_manifest(const std::string& directory, size_t model) {
  if (!is_directory(directory)) fail(Code::Io, "'" + directory + "' is not a directory");
  const std::string manifest_path = join_path(directory, ckpt::kManifestFile);
  if (!path_exists(manifest_path)) return std::nullopt;
  ckpt::Manifest manifest = ckpt::read_manifest(manifest_path);
  if (static_cast<int64_t>(model) >= manifest.num_models) {
    fail(Code::InvalidArgument, manifest_path + ": the checkpoint holds " + std::to_string(manifest.num_models) +
                                    " model(s), and model " + std::to_string(model) + " was asked for");
  }
  return manifest;
}

// The model files (name in the directory, path) of a checkpoint (given its manifest) or a saved model, in the
// order their tensors are read.
std::vector<std::pair<std::string, std::string>> source_files(const std::string& directory, size_t model,
                                                              bool checkpoint, ckpt::ModelIndex& index) {
  if (checkpoint) {
    const std::string name = ckpt::checkpoint_model_file(model);
    return {{name, join_path(directory, name)}};
  }
  switch (ckpt::saved_model_files(directory)) {
    case ckpt::SavedModelFiles::Sharded: {
      index = ckpt::read_model_index(join_path(directory, ckpt::kModelIndex));
      std::vector<std::pair<std::string, std::string>> files;
      for (const auto& [file, names] : index.tensors_by_file()) files.emplace_back(file, join_path(directory, file));
      return files;
    }
    case ckpt::SavedModelFiles::Single:
      return {{ckpt::kModelFile, join_path(directory, ckpt::kModelFile)}};
    case ckpt::SavedModelFiles::None:
      break;
  }
  fail_neither_checkpoint_nor_model(directory);
}

// Every saving process's piece of every tensor, each tensor's pieces in element order.
Source read_pieces(const std::string& directory, size_t model, int64_t world) {
  Source source;
  std::vector<ckpt::PartListing> listings;
  std::vector<formats::SafetensorsHeader> headers;
  for (int64_t rank = 0; rank < world; ++rank) {
    const std::string path = ckpt::model_part_file(directory, rank, model);
    source.files.emplace_back(path);
    const formats::MappedFile& file = source.files.back();
    headers.push_back(formats::parse_safetensors_header(file.data(), file.size(), path));
    ckpt::PartListing listing{path, {}, headers.back().metadata};
    for (const formats::SafetensorsEntry& entry : headers.back().entries) {
      const auto [begin, end] = formats::data_extent(entry, path);
      formats::check_in_payload(entry, end, file.size() - headers.back().data_start, path);
      const std::optional<size_t> numel = formats::array_nbytes(entry.shape, 1);
      if (!numel || *numel > static_cast<size_t>(INT64_MAX)) {
        fail(Code::InvalidArgument,
             path + ": '" + entry.name + "' has the impossible shape " + formats::shape_string(entry.shape));
      }
      listing.tensors.push_back({entry.name, entry.dtype, static_cast<int64_t>(*numel)});
    }
    listings.push_back(std::move(listing));
  }
  const ckpt::PiecedModel pieced = ckpt::assemble_pieces(listings);
  for (const ckpt::PiecedTensor& tensor : pieced.tensors) {
    SourceTensor merged{{tensor.name, tensor.dtype, tensor.shape, 0}, {}};
    // No dtype table without LibTorch: every piece must hold the same bytes per element.
    uint64_t element_bytes = 0;
    for (const ckpt::PiecedTensor::Piece& piece : tensor.pieces) {
      const std::string& path = listings[piece.part].path;
      const formats::SafetensorsEntry& entry = headers[piece.part].entries[piece.entry];
      const auto [begin, end] = formats::data_extent(entry, path);
      const auto numel = static_cast<uint64_t>(piece.end - piece.begin);
      if (element_bytes == 0) element_bytes = (end - begin) / numel;
      if (end - begin != numel * element_bytes || element_bytes == 0) {
        fail(Code::InvalidArgument, path + ": the piece of '" + tensor.name + "' holds " + std::to_string(end - begin) +
                                        " bytes for " + std::to_string(numel) +
                                        " elements, which its other pieces do not match");
      }
      merged.spans.emplace_back(source.files[piece.part].data() + headers[piece.part].data_start + begin, end - begin);
      merged.entry.bytes += end - begin;
    }
    source.tensors.push_back(std::move(merged));
  }
  source.ties = pieced.ties;
  return source;
}

Source read_source(const std::string& directory, size_t model) {
  const auto manifest = checkpoint_manifest(directory, model);
  if (manifest && manifest->in_pieces(model)) return read_pieces(directory, model, manifest->world_size);
  ckpt::ModelIndex index;
  Source source;
  std::set<std::string> seen;
  for (const auto& [name_in_directory, path] : source_files(directory, model, manifest.has_value(), index)) {
    source.files.emplace_back(path);
    const formats::MappedFile& file = source.files.back();
    const formats::SafetensorsHeader header = formats::parse_safetensors_header(file.data(), file.size(), path);
    std::vector<std::string> names;
    for (const formats::SafetensorsEntry& entry : header.entries) {
      const auto [begin, end] = formats::data_extent(entry, path);
      formats::check_in_payload(entry, end, file.size() - header.data_start, path);
      if (!seen.insert(entry.name).second) fail(Code::InvalidArgument, path + ": tensor '" + entry.name + "' is in two files");
      source.tensors.push_back(
          {{entry.name, entry.dtype, entry.shape, end - begin}, {{file.data() + header.data_start + begin, end - begin}}});
      names.push_back(entry.name);
    }
    if (!index.weight_map.empty()) {
      ckpt::check_shard_holds_its_tensors(index, name_in_directory, path, names);
    }
    const auto ties = formats::recorded_ties(header);
    source.ties.insert(ties.begin(), ties.end());
  }
  return source;
}

// Accelerate's SHARDED_STATE_DICT checkpoints keep model i in <checkpoint>/pytorch_model_fsdp_<i>, which its
// merge is given; in accel's the model's pieces are in the checkpoint's rank folders. A request naming such a
// folder, missing, of an accel checkpoint is that checkpoint's model i.
MergeRequest as_accel_checkpoint(MergeRequest request) {
  static const std::string kAccelerateFolder = "pytorch_model_fsdp_";
  std::string source = request.source;
  while (source.size() > 1 && source.back() == '/') source.pop_back();
  const size_t slash = source.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : source.substr(0, std::max<size_t>(slash, 1));
  const std::string name = source.substr(slash == std::string::npos ? 0 : slash + 1);
  const std::string index = name.rfind(kAccelerateFolder, 0) == 0 ? name.substr(kAccelerateFolder.size()) : "";
  const bool digits = !index.empty() && index.size() < 6 &&
                      std::all_of(index.begin(), index.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  if (digits && !path_exists(source) && path_exists(join_path(parent, ckpt::kManifestFile))) {
    request.source = parent;
    request.model = std::stoul(index);
  }
  return request;
}

void refuse_saved_model_in(const std::string& out) {
  if (!is_directory(out)) return;
  for (const std::string& name : list_directory(out)) {
    if (ckpt::is_model_file(name)) {
      fail(Code::InvalidArgument, "'" + out + "' holds a saved model already (" + name + "): merge into a new folder");
    }
  }
}

}  // namespace

void fail_neither_checkpoint_nor_model(const std::string& directory) {
  fail(Code::InvalidArgument, "'" + directory + "' is neither a checkpoint (no " + ckpt::kManifestFile +
                                  ") nor a saved model (no " + ckpt::kModelFile + " or " + ckpt::kModelIndex + ")");
}

std::vector<std::string> merge_model(const MergeRequest& given) {
  if (given.max_shard_size == 0) fail(Code::InvalidArgument, "the shard size must be positive");
  const MergeRequest request = as_accel_checkpoint(given);
  const Source source = read_source(request.source, request.model);
  refuse_saved_model_in(request.out);
  create_directories(request.out);
  std::vector<uint64_t> sizes;
  for (const SourceTensor& tensor : source.tensors) sizes.push_back(tensor.entry.bytes);
  std::vector<std::vector<size_t>> groups = ckpt::plan_shards(sizes, request.max_shard_size);
  const bool one_file = groups.size() <= 1;
  if (one_file) {
    groups.assign(1, {});
    for (size_t i = 0; i < source.tensors.size(); ++i) groups[0].push_back(i);
  }
  ckpt::ModelIndex index;
  std::vector<std::string> written;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto& group = groups[g];
    std::sort(group.begin(), group.end(),
              [&](size_t a, size_t b) { return source.tensors[a].entry.name < source.tensors[b].entry.name; });
    const std::string name = one_file ? ckpt::kModelFile : ckpt::shard_file(g, groups.size());
    std::vector<formats::HeaderEntry> entries;
    std::map<std::string, std::string> ties;
    for (size_t i : group) {
      entries.push_back(source.tensors[i].entry);
      index.weight_map.emplace(entries.back().name, name);
      index.total_size += entries.back().bytes;
    }
    for (const auto& [left_out, stored] : source.ties) {
      if (index.weight_map.count(stored) != 0 && index.weight_map.at(stored) == name) ties.emplace(left_out, stored);
    }
    AtomicFile file(join_path(request.out, name));
    formats::write_safetensors_header(file, entries, ties);
    for (size_t i : group) {
      for (const auto& [data, bytes] : source.tensors[i].spans) file.write(data, bytes);
    }
    file.commit();
    written.push_back(name);
  }
  if (!one_file) {
    ckpt::write_model_index(join_path(request.out, ckpt::kModelIndex), index);
    written.push_back(ckpt::kModelIndex);
  }
  return written;
}

uint64_t parse_shard_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::map<std::string, uint64_t> kUnits = {
      {"", 1},          {"b", 1},          {"kb", 1000},          {"mb", 1000'000},          {"gb", 1000'000'000},
      {"tb", 1000'000'000'000}, {"kib", 1ULL << 10}, {"mib", 1ULL << 20}, {"gib", 1ULL << 30}, {"tib", 1ULL << 40}};
  const auto found = kUnits.find(unit);
  uint64_t number = 0;
  bool fits = digits > 0 && digits <= 15 && found != kUnits.end();
  if (fits) {
    number = std::stoull(text.substr(0, digits));
    fits = number > 0 && number <= UINT64_MAX / found->second;
  }
  if (!fits) {
    fail(Code::InvalidArgument, "'" + text + "' is not a shard size (bytes, or a number with KB, MB, GB, TB, KiB, "
                                "MiB, GiB or TiB, e.g. \"10GB\")");
  }
  return number * found->second;
}

}  // namespace accel::cli
