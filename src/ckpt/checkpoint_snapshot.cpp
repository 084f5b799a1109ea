#include "ckpt/checkpoint_snapshot.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include "ckpt/model_pieces.hpp"
#include "ckpt/model_weights.hpp"
#include "ckpt/one_folder.hpp"
#include "ckpt/rng_states.hpp"
#include "ckpt/streamed_model.hpp"
#include "core/error.hpp"
#include "core/features.hpp"
#include "core/files.hpp"
#include "distributed/collectives/collectives.hpp"
#include "formats/safetensors.hpp"
#include "tracking/trackers.hpp"
#include "train/training_loop.hpp"
#include "train/optim/zero_optimizer.hpp"

namespace accel::ckpt {

namespace {


// The bytes as a uint8 tensor that owns them (no copy: an optimizer's state can be most of a process's memory).
at::Tensor bytes_tensor(std::string bytes) {
  auto* owner = new std::string(std::move(bytes));
  return at::from_blob(owner->data(), {static_cast<int64_t>(owner->size())}, [owner](void*) { delete owner; },
                       at::TensorOptions(at::kByte));
}

// A copy in host memory, contiguous, that later in-place updates of the model do not reach.
at::Tensor host_copy(const at::Tensor& tensor) {
  return tensor.detach().to(tensor.options().device(at::kCPU), /*non_blocking=*/false, /*copy=*/true,
                            at::MemoryFormat::Contiguous);
}

Manifest manifest_of(distributed::State& state, const CheckpointObjects& objects, bool has_scaler) {
  Manifest manifest;
  manifest.accel_version = version_string();
  manifest.torch_version = torch_version();
  manifest.world_size = state.launch().world_size;
  manifest.step = state.gradient_state().step();
  manifest.epoch = objects.loaders.empty() ? 0 : objects.loaders.front()->epoch();
  manifest.num_models = static_cast<int64_t>(objects.models.size());
  manifest.num_optimizers = static_cast<int64_t>(objects.optimizers.size());
  manifest.num_schedulers = static_cast<int64_t>(objects.schedulers.size());
  manifest.num_loaders = static_cast<int64_t>(objects.loaders.size());
  manifest.has_scaler = has_scaler;
  for (const CustomObject* object : objects.custom) manifest.custom_objects.push_back(object->name);
  for (auto* optimizer : objects.optimizers) {
    const train::ZeroShard* shard = optimizer->optimizer().zero_shard();
    if (shard == nullptr) continue;
    manifest.zero_stage = std::max<int64_t>(manifest.zero_stage, shard->stage());
    manifest.zero_split.resize(static_cast<size_t>(manifest.world_size));
    const auto split = shard->split_by_rank();
    for (size_t rank = 0; rank < split.size(); ++rank) {
      manifest.zero_split[rank].insert(manifest.zero_split[rank].end(), split[rank].begin(), split[rank].end());
    }
  }
  for (size_t i = 0; i < objects.models.size(); ++i) {
    if (objects.models[i]->checkpoint_in_pieces()) manifest.models_in_pieces.push_back(static_cast<int64_t>(i));
  }
  if (const tracking::Trackers* trackers = objects.trackers) {
    manifest.tracker_run = trackers->run_name();
    manifest.tracker_last_step = trackers->last_logged_step().value_or(-1);
  }
  return manifest;
}

}  // namespace

CheckpointSnapshot take_snapshot(const std::shared_ptr<distributed::State>& state, const CheckpointObjects& objects,
                                 bool copy_tensors) {
  CheckpointSnapshot snapshot;
  snapshot.rank = state->launch().rank;
  for (size_t i = 0; i < objects.models.size(); ++i) {
    if (!objects.models[i]->prepared()) {
      fail(Code::InvalidState, "model " + std::to_string(i) + " is not prepared: a checkpoint holds prepared models "
                               "(accel_state_prepare_model); save an unprepared model's weights with save_model");
    }
  }
  // The registered objects first: one that cannot be saved fails the save before anything is captured.
  for (const CustomObject* object : objects.custom) {
    snapshot.custom_files.emplace_back(custom_object_file(object->name), object->save());
  }
  for (size_t i = 0; i < objects.loaders.size(); ++i) {
    snapshot.rank_states.emplace_back(states_entry("loader", i), bytes_tensor(objects.loaders[i]->save_state()));
  }
  for (auto& [generator, rng_state] : capture_rng_states()) snapshot.rank_states.emplace_back("rng." + generator, rng_state);
  // Under ZeRO each process writes the state of what it steps into its own folder, so none gathers more.
  std::vector<std::string> optimizer_states;
  for (size_t i = 0; i < objects.optimizers.size(); ++i) {
    const train::Optimizer& optimizer = objects.optimizers[i]->optimizer();
    if (snapshot.rank != 0 && optimizer.zero_shard() == nullptr) continue;
    auto [shared, own, own_index] = optimizer.save_state_per_process();
    if (optimizer.zero_shard() != nullptr) {
      const std::string entry = states_entry(kOptimizerPartEntry, i);
      snapshot.rank_states.emplace_back(entry, bytes_tensor(std::move(own)));
      if (!own_index.empty()) snapshot.rank_metadata.emplace(entry, std::move(own_index));
    }
    optimizer_states.push_back(std::move(shared));
  }
  for (const train::Model* model : objects.models) {
    std::optional<ModelPart> part;
    if (model->checkpoint_in_pieces()) {
      part = model_part(*model, snapshot.rank, state->launch().world_size);
      if (copy_tensors) {
        for (auto& entry : part->pieces) entry.second = host_copy(entry.second);
      }
    }
    snapshot.model_parts.push_back(std::move(part));
  }
  if (snapshot.rank != 0) return snapshot;

  for (const train::Model* model : objects.models) {
    // A model saved in pieces is in model_parts; a sharded one is written by begin_save as its units are gathered.
    snapshot.written_models.push_back(model->checkpoint_in_pieces() || model->sharded_units() != nullptr);
    StoredModel stored = snapshot.written_models.back() ? StoredModel{} : stored_model(model->tensor_slots());
    if (copy_tensors) {
      for (auto& entry : stored.tensors) entry.second = host_copy(entry.second);
    }
    snapshot.models.push_back(std::move(stored));
  }
  for (size_t i = 0; i < objects.optimizers.size(); ++i) {
    snapshot.shared_states.emplace_back(states_entry("optimizer", i), bytes_tensor(std::move(optimizer_states[i])));
  }
  for (size_t i = 0; i < objects.schedulers.size(); ++i) {
    snapshot.shared_states.emplace_back(states_entry("scheduler", i), bytes_tensor(objects.schedulers[i]->scheduler().save_state()));
  }
  train::GradScaler* scaler = objects.scaler;
  if (scaler != nullptr) snapshot.shared_states.emplace_back("scaler", bytes_tensor(scaler->save_state()));
  snapshot.manifest = manifest_of(*state, objects, scaler != nullptr);
  return snapshot;
}

void write_snapshot(const CheckpointSnapshot& snapshot, const std::string& directory) {
  const std::string own = join_path(directory, rank_directory(snapshot.rank));
  create_directories(own);
  formats::write_safetensors(join_path(own, kStatesFile), snapshot.rank_states, snapshot.rank_metadata);
  for (size_t i = 0; i < snapshot.model_parts.size(); ++i) {
    if (const auto& part = snapshot.model_parts[i]) {
      formats::write_safetensors(model_part_file(directory, snapshot.rank, i), part->pieces, part->metadata);
    }
  }
  for (const auto& [name, bytes] : snapshot.custom_files) {
    AtomicFile file(join_path(own, name));
    file.write(bytes.data(), bytes.size());
    file.commit();
  }
  if (snapshot.rank != 0) return;
  for (size_t i = 0; i < snapshot.models.size(); ++i) {
    if (snapshot.written_models[i]) continue;
    formats::write_safetensors(join_path(directory, checkpoint_model_file(i)), snapshot.models[i].tensors,
                               snapshot.models[i].ties);
  }
  formats::write_safetensors(join_path(directory, kStatesFile), snapshot.shared_states);
  write_manifest(join_path(directory, kManifestFile), snapshot.manifest);
}

std::string staging_directory(const std::string& directory) { return directory + ".saving"; }

void discard_staging(const std::string& staging) noexcept {
  try {
    remove_all(staging);
  } catch (...) {
    // See the header: nothing better to do than leave it.
  }
}

namespace {

// The files of models sharded by zero_stage 3, written as their units are gathered: every rank takes part,
// the main process writes (no rank ever holds the whole model). Collective.
void write_sharded_models(const CheckpointObjects& objects, const std::string& staging, bool main) {
  for (size_t i = 0; i < objects.models.size(); ++i) {
    if (objects.models[i]->sharded_units() != nullptr && !objects.models[i]->checkpoint_in_pieces()) {
      write_model_file(*objects.models[i], join_path(staging, checkpoint_model_file(i)), main);
    }
  }
}

}  // namespace

CheckpointSnapshot begin_save(const std::shared_ptr<distributed::State>& state, const std::string& directory,
                              const CheckpointObjects& objects, bool copy_tensors) {
  const std::string staging = staging_directory(directory);
  const bool main = state->launch().rank == 0;
  CheckpointSnapshot snapshot;
  const auto prepare = [&] {
    snapshot = take_snapshot(state, objects, copy_tensors);
    if (main) {
      // Left over by a run killed while saving: never a checkpoint, as only a finished one is moved.
      remove_all(staging);
      create_directories(staging);
    }
    write_sharded_models(objects, staging, main);
  };
  if (state->launch().world_size == 1) {
    prepare();
    return snapshot;
  }
  // Called on some ranks only (under `if is_main_process`), both sides fail within seconds, naming it.
  state->group("save_state")->announce("save_state");
  std::string model_files;
  for (const train::Model* model : objects.models) model_files += model->checkpoint_in_pieces() ? "pieces " : "whole ";
  require_one_folder(*state, directory, "save_state", model_files);
  try {
    // Also the barrier after which the staging folder exists for every rank.
    distributed::all_or_none(*state, prepare, "cannot take its part of the checkpoint, so no rank saves");
  } catch (...) {
    if (main) discard_staging(staging);
    throw;
  }
  return snapshot;
}

}  // namespace accel::ckpt
