#include "ckpt/checkpoint.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <optional>

#include "ckpt/background_save.hpp"
#include "ckpt/checkpoint_snapshot.hpp"
#include "ckpt/directory_swap.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/model_weights.hpp"
#include "ckpt/one_folder.hpp"
#include "ckpt/rng_states.hpp"
#include "ckpt/save_directory.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/timeline.hpp"
#include "core/utf8.hpp"
#include "data/loader_state.hpp"
#include "distributed/collectives/collectives.hpp"
#include "formats/array_view.hpp"
#include "formats/safetensors.hpp"
#include "train/optim/archive.hpp"
#include "train/optim/optimizer.hpp"

namespace accel::ckpt {

namespace {


std::string view_bytes(const formats::SafetensorsFile& file, const std::string& name, const std::string& path) {
  const formats::ArrayView& view = file.array(name);
  if (view.dtype != at::kByte || view.shape.size() != 1) {
    fail(Code::InvalidArgument, path + ": '" + name + "' is not a 1-d uint8 tensor");
  }
  return std::string(static_cast<const char*>(view.data), view.nbytes);
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

void expect_count(const char* what, int64_t saved, size_t given, const std::string& path) {
  if (saved != static_cast<int64_t>(given)) {
    fail(Code::InvalidArgument, path + ": the checkpoint holds " + std::to_string(saved) + " " + what +
                                    ", " + std::to_string(given) + " were given to load");
  }
}

// Everything load_state restores, read and checked before any of it is applied.
struct LoadedCheckpoint {
  Manifest manifest;
  std::vector<ModelWeights> models;
  std::vector<train::Optimizer::PendingState> optimizers;
  std::vector<std::string> schedulers;
  std::optional<std::string> scaler;
  std::vector<std::string> loaders;
  NamedTensors rng;
  std::vector<std::string> custom;  // objects.custom's bytes, in its order
};

LoadedCheckpoint read_checkpoint(const distributed::State& state, const std::string& directory,
                                 const CheckpointObjects& objects, const train::GradScaler* scaler) {
  LoadedCheckpoint loaded;
  const std::string manifest_path = join_path(directory, kManifestFile);
  loaded.manifest = read_manifest(manifest_path);
  const Manifest& manifest = loaded.manifest;
  // Registered objects are per process; without them a checkpoint resumes on another number of processes
  // (the optimizer state is whole, or under ZeRO every rank's part is read), a rank past the saved ones
  // keeping its own random state. Loaders resume there from rank 0's position (every rank's is the same step), which
  // Loader::load_state accepts when the global batch is the same.
  const bool same_world = manifest.world_size == state.launch().world_size;
  const auto per_process = std::find_if(objects.custom.begin(), objects.custom.end(),
                                        [](const CustomObject* object) { return !object->load_parts; });
  if (!same_world && per_process != objects.custom.end()) {
    fail(Code::InvalidArgument, manifest_path + ": the checkpoint was saved by " + std::to_string(manifest.world_size) +
                                    " processes, this run has " + std::to_string(state.launch().world_size) +
                                    ", and the registered object '" + (*per_process)->name + "' holds a state per process");
  }
  expect_count("models", manifest.num_models, objects.models.size(), manifest_path);
  expect_count("optimizers", manifest.num_optimizers, objects.optimizers.size(), manifest_path);
  expect_count("schedulers", manifest.num_schedulers, objects.schedulers.size(), manifest_path);
  expect_count("loaders", manifest.num_loaders, objects.loaders.size(), manifest_path);
  if (manifest.has_scaler != (scaler != nullptr)) {
    fail(Code::InvalidArgument, manifest_path + (manifest.has_scaler ? ": the checkpoint holds a grad scaler, this run has none (fp16 off)"
                                                                     : ": the checkpoint has no grad scaler, this run uses one (fp16)"));
  }
  for (size_t i = 0; i < objects.models.size(); ++i) {
    loaded.models.push_back(manifest.in_pieces(i)
                                ? ModelWeights::from_parts(*objects.models[i], directory, i, manifest.world_size)
                                : ModelWeights::from_file(*objects.models[i], join_path(directory, checkpoint_model_file(i))));
  }

  const std::string shared_path = join_path(directory, kStatesFile);
  const formats::SafetensorsFile shared(shared_path);
  for (size_t i = 0; i < objects.optimizers.size(); ++i) {
    // Saved under ZeRO by every process: whoever loads reads every part (any stage, any number of processes),
    // one at a time.
    const std::string entry = states_entry(kOptimizerPartEntry, i);
    const auto part_path = [&](size_t rank) { return rank_file(directory, static_cast<int64_t>(rank), kStatesFile); };
    const auto read_part = [&](size_t rank) {
      const formats::SafetensorsFile part(part_path(rank));
      return view_bytes(part, entry, part_path(rank));
    };
    // Its header only: the file's pages are not read.
    const auto read_index = [&](size_t rank) -> std::optional<std::string> {
      const formats::SafetensorsFile part(part_path(rank));
      const auto listed = part.metadata().find(entry);
      return listed == part.metadata().end() ? std::nullopt : std::optional<std::string>(listed->second);
    };
    loaded.optimizers.push_back(objects.optimizers[i]->optimizer().read_state(
        view_bytes(shared, states_entry("optimizer", i), shared_path), read_part, static_cast<size_t>(manifest.world_size),
        read_index));
  }
  for (size_t i = 0; i < objects.schedulers.size(); ++i) {
    loaded.schedulers.push_back(view_bytes(shared, states_entry("scheduler", i), shared_path));
    train::read_archive(loaded.schedulers.back(), "scheduler");
  }
  if (scaler != nullptr) {
    loaded.scaler = view_bytes(shared, "scaler", shared_path);
    train::read_archive(*loaded.scaler, "grad scaler");
  }

  if (!objects.loaders.empty()) {
    const std::string loaders_path =
        rank_file(directory, same_world ? state.launch().rank : 0, kStatesFile);
    const formats::SafetensorsFile loaders(loaders_path);
    for (size_t i = 0; i < objects.loaders.size(); ++i) {
      loaded.loaders.push_back(view_bytes(loaders, states_entry("loader", i), loaders_path));
      if (objects.loaders[i]->checked_state(loaded.loaders.back()).world_size == -1 && !same_world) {
        fail(Code::InvalidArgument, loaders_path + ": loader " + std::to_string(i) + "'s state does not say how many "
                                    "processes saved it (an older accel's), so it resumes on " +
                                    std::to_string(manifest.world_size) + " processes only");
      }
    }
  }
  if (state.launch().rank < manifest.world_size) {
    const std::string own_path = rank_file(directory, state.launch().rank, kStatesFile);
    const formats::SafetensorsFile own(own_path);
    for (const formats::ArrayView& view : own.arrays()) {
      if (view.name.rfind("rng.", 0) == 0) loaded.rng.emplace_back(view.name.substr(4), formats::copy_to_tensor(view));
    }
    check_rng_states(loaded.rng, own_path);
  }

  for (const CustomObject* object : objects.custom) {
    if (std::find(manifest.custom_objects.begin(), manifest.custom_objects.end(), object->name) == manifest.custom_objects.end()) {
      fail(Code::InvalidArgument, manifest_path + ": the registered object '" + object->name + "' is not in the checkpoint");
    }
  }
  for (const std::string& name : manifest.custom_objects) {
    const bool registered = std::any_of(objects.custom.begin(), objects.custom.end(),
                                        [&](const CustomObject* object) { return object->name == name; });
    if (!registered) {
      fail(Code::InvalidArgument, manifest_path + ": the checkpoint holds the object '" + name + "', which is not registered");
    }
  }
  for (const CustomObject* object : objects.custom) {
    if (!object->load_parts) {
      loaded.custom.push_back(read_file(rank_file(directory, state.launch().rank, custom_object_file(object->name))));
      continue;
    }
    // Read while loading, one at a time; here only found, so that a missing one fails before anything loads.
    loaded.custom.emplace_back();
    const SavedParts parts(directory, object->name, manifest.world_size);
    for (int64_t rank = 0; rank < parts.count(); ++rank) {
      if (!path_exists(parts.path(rank))) {
        fail(Code::Io, parts.path(rank) + ": missing (the registered object '" + object->name + "' of process " + std::to_string(rank) + ")");
      }
    }
  }
  return loaded;
}

}  // namespace

SavedParts::SavedParts(std::string directory, std::string name, int64_t count)
    : directory_(std::move(directory)), name_(std::move(name)), count_(count) {}

std::string SavedParts::read(int64_t part) const {
  if (part < 0 || part >= count_) {
    fail(Code::OutOfRange, "the registered object '" + name_ + "' was saved by " + std::to_string(count_) +
                               " processes, so it has no part " + std::to_string(part));
  }
  return read_file(path(part));
}

std::string SavedParts::path(int64_t part) const { return rank_file(directory_, part, custom_object_file(name_)); }

void check_custom_object_name(const std::string& name) {
  if (name.empty() || name.front() == '.' || !std::all_of(name.begin(), name.end(), name_char)) {
    fail(Code::InvalidArgument, "the object name '" + escaped_bytes(name) + "' is not usable in a file name (letters, digits, '_', '-', '.', not starting with '.')");
  }
}

void save_state(const std::shared_ptr<distributed::State>& state, const std::string& requested_directory,
                const CheckpointObjects& objects, const std::function<void()>& before_move) {
  const std::string directory = checkpoint_directory(requested_directory);
  const timeline::Span span("save_state");
  // The model's own tensors: nothing changes them before this call returns.
  const CheckpointSnapshot snapshot = begin_save(state, directory, objects, /*copy_tensors=*/false);
  const std::string staging = staging_directory(directory);
  const bool main = state->launch().rank == 0;
  try {
    write_snapshot(snapshot, staging);
    state->wait_for_everyone();
    if (main && before_move) before_move();
    if (main) move_into_place(staging, directory);
  } catch (...) {
    if (main) discard_staging(staging);
    throw;
  }
  state->wait_for_everyone();
}

void load_state(const std::shared_ptr<distributed::State>& state, const std::string& directory, const CheckpointObjects& objects) {
  const timeline::Span span("load_state");
  train::GradScaler* scaler = objects.scaler;
  if (auto* group = state->group("load_state")) group->announce("load_state");
  require_one_folder(*state, directory, "load_state");
  // Every rank checks its files, then all learn whether any failed: a checkpoint restored on some ranks
  // and not on others would train them apart.
  std::optional<LoadedCheckpoint> read;
  distributed::all_or_none(*state, [&] { read = read_checkpoint(*state, directory, objects, scaler); },
                           "cannot load the checkpoint, so no rank does");
  LoadedCheckpoint& loaded = *read;

  // The registered objects first: one whose load fails leaves the built-in objects untouched.
  if (!objects.custom.empty()) {
    const auto load_custom = [&] {
      for (size_t i = 0; i < objects.custom.size(); ++i) {
        const CustomObject& object = *objects.custom[i];
        if (object.load_parts) {
          object.load_parts(SavedParts(directory, object.name, loaded.manifest.world_size));
        } else {
          object.load(loaded.custom[i]);
        }
      }
    };
    if (state->launch().world_size > 1) {
      distributed::all_or_none(*state, load_custom, "cannot load a registered object, so no rank loads the rest");
    } else {
      load_custom();
    }
  }

  for (size_t i = 0; i < objects.loaders.size(); ++i) objects.loaders[i]->load_state(loaded.loaders[i]);
  for (size_t i = 0; i < objects.models.size(); ++i) loaded.models[i].copy_into(*objects.models[i]);
  for (size_t i = 0; i < objects.optimizers.size(); ++i) {
    objects.optimizers[i]->optimizer().load_state(std::move(loaded.optimizers[i]));
  }
  for (size_t i = 0; i < objects.schedulers.size(); ++i) objects.schedulers[i]->scheduler().load_state(loaded.schedulers[i]);
  if (scaler != nullptr) scaler->load_state(*loaded.scaler);
  if (!loaded.rng.empty()) restore_rng_states(loaded.rng);
  state->gradient_state().set_step(loaded.manifest.step);
}

}  // namespace accel::ckpt
