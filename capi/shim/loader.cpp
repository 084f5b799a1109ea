#include "accel/loader.h"

#include "data/file_dataset.hpp"
#include "data/loader_options.hpp"
#include "shim/entry_point.hpp"

extern "C" int accel_dataset_from_tensors(accel_dataset_t** out, const char* const* names,
                                          accel_tensor_t* const* tensors, size_t count) {
  return guarded_out(__func__, out, [&] {
    auto fields = accel::capi::named_tensors(names, tensors, count, "tensors");
    *out = new accel_dataset{{}, std::make_shared<accel::data::TensorDataset>(std::move(fields)), nullptr};
  });
}

extern "C" int accel_dataset_from_callback(accel_dataset_t** out, int64_t length, accel_get_item_fn get_item,
                                           void* payload) {
  return guarded_out(__func__, out, [&] {
    require(reinterpret_cast<const void*>(get_item), "get_item");
    auto fetch_item = [get_item, payload](int64_t index) {
      accel_sample sample;
      const int code = get_item(index, &sample, payload);
      if (code != 0) {
        accel::fail(accel::Code::Callback, "get_item returned " + std::to_string(code) + " for item " + std::to_string(index));
      }
      return std::move(sample.fields);
    };
    *out = new accel_dataset{{}, std::make_shared<accel::data::ItemDataset>(length, fetch_item), nullptr};
  });
}

extern "C" int accel_dataset_from_iterable(accel_dataset_t** out, accel_start_epoch_fn start_epoch,
                                           accel_next_item_fn next_item, void* payload) {
  return guarded_out(__func__, out, [&] {
    require(reinterpret_cast<const void*>(start_epoch), "start_epoch");
    require(reinterpret_cast<const void*>(next_item), "next_item");
    auto start = [start_epoch, payload](int64_t epoch) {
      if (const int code = start_epoch(epoch, payload); code != 0) {
        accel::fail(accel::Code::Callback, "start_epoch returned " + std::to_string(code) + " for epoch " + std::to_string(epoch));
      }
    };
    auto count = std::make_shared<int64_t>(0);
    auto next = [next_item, payload, count]() -> std::optional<accel::NamedTensors> {
      accel_sample sample;
      int end = 0;
      if (const int code = next_item(&sample, &end, payload); code != 0) {
        accel::fail(accel::Code::Callback, "next_item returned " + std::to_string(code) + " for item " + std::to_string(*count));
      }
      if (end != 0) return std::nullopt;
      ++*count;
      return std::move(sample.fields);
    };
    *out = new accel_dataset{{}, nullptr, std::make_shared<accel::data::CallbackIterableDataset>(start, next)};
  });
}

extern "C" int accel_dataset_from_safetensors(accel_dataset_t** out, const char* path) {
  return guarded_out(__func__, out, [&] {
    require(path, "path");
    *out = new accel_dataset{{}, accel::data::FileDataset::from_safetensors(path), nullptr};
  });
}

extern "C" int accel_dataset_from_npy(accel_dataset_t** out, const char* const* names, const char* const* paths,
                                      size_t count) {
  return guarded_out(__func__, out, [&] {
    require(names, "names");
    require(paths, "paths");
    std::vector<std::string> name_list, path_list;
    for (size_t i = 0; i < count; ++i) {
      require(names[i], "names[i]");
      require(paths[i], "paths[i]");
      name_list.emplace_back(names[i]);
      path_list.emplace_back(paths[i]);
    }
    *out = new accel_dataset{{}, accel::data::FileDataset::from_npy(name_list, path_list), nullptr};
  });
}

extern "C" int accel_sample_add(accel_sample_t* sample, const char* name, const accel_tensor_t* tensor) {
  return guarded(__func__, [&] {
    require(sample, "sample");
    require(name, "name");
    require(tensor, "tensor");
    accel::add_field(sample->fields, name, tensor->tensor);
  });
}

extern "C" int64_t accel_dataset_length(const accel_dataset_t* dataset) {
  return read_handle<int64_t>(__func__, dataset, 0, [&](const auto&) { return dataset->dataset ? dataset->dataset->size() : int64_t{-1}; });
}

extern "C" void accel_dataset_free(accel_dataset_t* dataset) { release(__func__, dataset); }

extern "C" int accel_loader_new(accel_loader_t** out, accel_state_t* state, accel_dataset_t* dataset,
                                const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    require(dataset, "dataset");
    auto config = accel::data::loader_config(settings_of(options));
    auto loader = dataset->dataset ? std::make_unique<accel::data::Loader>(state->accelerator->state(), dataset->dataset, std::move(config))
                                   : std::make_unique<accel::data::Loader>(state->accelerator->state(), dataset->iterable, std::move(config));
    *out = new accel_loader{{}, std::move(loader), {}};
  });
}

extern "C" int accel_loader_new_with_batches(accel_loader_t** out, accel_state_t* state, accel_dataset_t* dataset,
                                             const int64_t* indices, const size_t* batch_sizes, size_t num_batches,
                                             const accel_options_t* options) {
  return guarded_out(__func__, out, [&] {
    require(state, "state");
    require(dataset, "dataset");
    require(batch_sizes, "batch_sizes");
    if (!dataset->dataset) accel::fail(accel::Code::InvalidArgument, "a given list of batches needs a map-style dataset");
    auto config = accel::data::loader_config(settings_of(options));
    config.batches = accel::data::batches_of_sizes(indices, batch_sizes, num_batches);
    *out = new accel_loader{{}, std::make_unique<accel::data::Loader>(state->accelerator->state(), dataset->dataset, std::move(config)), {}};
  });
}

extern "C" void accel_loader_free(accel_loader_t* loader) { release(__func__, loader); }

extern "C" int accel_loader_next(accel_loader_t* loader, accel_batch_t** out) {
  return guarded_out(__func__, out, [&] {
    require(loader, "loader");
    if (auto batch = loader->loader->next()) *out = new accel_batch{{}, accel::IndexedFields(std::move(*batch))};
  });
}

extern "C" int accel_loader_length(const accel_loader_t* loader, int64_t* out) {
  return guarded(__func__, [&] {
    require(loader, "loader");
    require(out, "out");
    *out = loader->loader->length();
  });
}

extern "C" int accel_loader_end_of_dataloader(const accel_loader_t* loader) {
  return read_handle<int>(__func__, loader, 0, [](const accel_loader& l) { return l.loader->end_of_dataloader(); });
}
extern "C" int64_t accel_loader_remainder(const accel_loader_t* loader) {
  return read_handle<int64_t>(__func__, loader, -1, [](const accel_loader& l) { return l.loader->remainder(); });
}
extern "C" int64_t accel_loader_epoch(const accel_loader_t* loader) {
  return read_handle<int64_t>(__func__, loader, 0, [](const accel_loader& l) { return l.loader->epoch(); });
}

extern "C" int accel_loader_set_epoch(accel_loader_t* loader, int64_t epoch) {
  return guarded(__func__, [&] {
    require(loader, "loader");
    loader->loader->set_epoch(epoch);
  });
}

extern "C" int accel_loader_skip_first_batches(accel_loader_t* loader, int64_t n) {
  return guarded(__func__, [&] {
    require(loader, "loader");
    loader->loader->skip_first_batches(n);
  });
}

extern "C" int accel_loader_save_state(accel_loader_t* loader, const void** data, size_t* size) {
  return guarded(__func__, [&] {
    require(loader, "loader");
    require(data, "data");
    require(size, "size");
    loader->saved_state = loader->loader->save_state();
    *data = loader->saved_state.data();
    *size = loader->saved_state.size();
  });
}

extern "C" int accel_loader_load_state(accel_loader_t* loader, const void* data, size_t size) {
  return guarded(__func__, [&] {
    require(loader, "loader");
    require(data, "data");
    loader->loader->load_state(std::string(static_cast<const char*>(data), size));
  });
}

extern "C" size_t accel_batch_count(const accel_batch_t* batch) {
  return read_handle<size_t>(__func__, batch, 0, [&](const auto&) { return batch->fields.size(); });
}

extern "C" const char* accel_batch_name(const accel_batch_t* batch, size_t index) {
  return read_handle<const char*>(__func__, batch, nullptr, [&](const auto&) { return index < batch->fields.size() ? batch->fields[index].first.c_str() : nullptr; });
}

extern "C" int accel_batch_get(const accel_batch_t* batch, const char* name, accel_tensor_t** out) {
  return guarded_out(__func__, out, [&] {
    require(batch, "batch");
    require(name, "name");
    *out = new accel_tensor(batch->fields.named(name, "the batch"));
  });
}

extern "C" void accel_batch_free(accel_batch_t* batch) { release(__func__, batch); }
