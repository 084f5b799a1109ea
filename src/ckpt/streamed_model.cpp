#include "ckpt/streamed_model.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ckpt/model_layout.hpp"
#include "core/files.hpp"
#include "formats/safetensors.hpp"

namespace accel::ckpt {

StoredModel stored_layout(const train::Model& model) {
  StoredModel layout = stored_model(model.tensor_slots());
  std::unordered_map<const c10::TensorImpl*, size_t> unit_order;
  for (const at::Tensor& parameter : model.sharded_parameters()) unit_order.emplace(parameter.unsafeGetTensorImpl(), unit_order.size());
  const auto position = [&](const at::Tensor& tensor) {
    const auto found = unit_order.find(tensor.unsafeGetTensorImpl());
    return found == unit_order.end() ? -1 : static_cast<int64_t>(found->second);
  };
  std::stable_sort(layout.tensors.begin(), layout.tensors.end(),
                   [&](const auto& a, const auto& b) { return position(a.second) < position(b.second); });
  return layout;
}

void stream_stored_values(const train::Model& model, const StoredModel& layout, bool writer,
                          const std::function<void(const at::Tensor&)>& append) {
  std::exception_ptr failed;
  const auto give = [&](const at::Tensor& value) {
    if (!writer || failed) return;
    try {
      append(value);
    } catch (...) {
      failed = std::current_exception();
    }
  };
  for (const auto& [name, tensor] : layout.tensors) {
    if (!model.is_sharded(tensor)) give(tensor);
  }
  model.for_each_gathered_parameter(writer, [&](const at::Tensor&, const at::Tensor& whole) { give(whole); });
  if (failed) std::rethrow_exception(failed);
}

void for_each_stored_tensor(const train::Model& model, bool keep,
                            const std::function<void(const std::string&, const at::Tensor&)>& each) {
  const StoredModel layout = stored_layout(model);
  size_t next = 0;
  stream_stored_values(model, layout, keep, [&](const at::Tensor& value) { each(layout.tensors[next++].first, value); });
}

void write_model_file(const train::Model& model, const std::string& path, bool writer) {
  const StoredModel layout = stored_layout(model);
  if (!writer) {
    stream_stored_values(model, layout, false, {});
    return;
  }
  AtomicFile file(path);
  std::vector<formats::TensorHeader> entries;
  for (const auto& [name, tensor] : layout.tensors) entries.push_back(formats::header_of(name, tensor));
  formats::SafetensorsStream stream(file, std::move(entries), layout.ties);
  stream_stored_values(model, layout, true, [&](const at::Tensor& value) { stream.append(value); });
  stream.finish();
  file.commit();
}

std::set<std::string> write_model_files(const train::Model& model, const std::string& directory,
                                        uint64_t max_shard_size, bool writer) {
  const StoredModel layout = stored_layout(model);
  if (!writer) {
    stream_stored_values(model, layout, false, {});
    return {};
  }
  create_directories(directory);
  std::vector<uint64_t> sizes;
  for (const auto& [name, tensor] : layout.tensors) sizes.push_back(static_cast<uint64_t>(tensor.numel()) * tensor.element_size());
  std::vector<std::vector<size_t>> groups = plan_shards(sizes, max_shard_size);
  const bool one_file = groups.size() <= 1;
  if (one_file) {
    groups.assign(1, {});
    for (size_t i = 0; i < layout.tensors.size(); ++i) groups[0].push_back(i);
  }
  // A model held whole writes each file's tensors in name order (the bytes every save wrote before stage 3);
  // a sharded one in the order their values come.
  const bool sharded = model.sharded_units() != nullptr;
  if (!sharded) {
    for (auto& group : groups) {
      std::sort(group.begin(), group.end(), [&](size_t a, size_t b) { return layout.tensors[a].first < layout.tensors[b].first; });
    }
  }
  const std::string single = join_path(directory, kModelFile), index_path = join_path(directory, kModelIndex);
  std::vector<std::unique_ptr<AtomicFile>> files;
  std::vector<std::unique_ptr<formats::SafetensorsStream>> streams;
  std::vector<size_t> stream_of(layout.tensors.size(), 0);
  std::set<std::string> written;
  ModelIndex index;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string name = one_file ? kModelFile : shard_file(g, groups.size());
    std::vector<formats::TensorHeader> entries;
    std::vector<std::string> names;
    for (size_t i : groups[g]) {
      stream_of[i] = g;
      entries.push_back(formats::header_of(layout.tensors[i].first, layout.tensors[i].second));
      names.push_back(layout.tensors[i].first);
      index.weight_map.emplace(layout.tensors[i].first, name);
      index.total_size += sizes[i];
    }
    files.push_back(std::make_unique<AtomicFile>(join_path(directory, name)));
    streams.push_back(std::make_unique<formats::SafetensorsStream>(*files.back(), std::move(entries),
                                                                   one_file ? layout.ties : layout.ties_to(names)));
    written.insert(name);
  }
  if (sharded) {
    size_t next = 0;
    stream_stored_values(model, layout, true, [&](const at::Tensor& value) { streams[stream_of[next++]]->append(value); });
  } else {
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t i : groups[g]) streams[g]->append(layout.tensors[i].second);
    }
  }
  for (size_t g = 0; g < files.size(); ++g) {
    streams[g]->finish();
    files[g]->finish();
  }
  // The previous save's entry point goes before any new file is renamed over one of its shards, so that no
  // index ever names a shard of another save.
  remove_all(index_path);
  if (!one_file) remove_all(single);
  for (const auto& file : files) file->commit();
  if (!one_file) {
    written.insert(kModelIndex);
    write_model_index(index_path, index);
  }
  return written;
}

}  // namespace accel::ckpt
