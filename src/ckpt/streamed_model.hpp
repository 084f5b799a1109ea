// A model's weights written as their values come: under zero_stage 3 (train/ddp/sharded_units.hpp) no process
// holds the whole model, so its parameters are gathered unit by unit and each unit written before the next is
// gathered; a model held whole is written from its tensors. Either way the files are the ones every stage
// writes (model.safetensors, or shards with an index), so any stage and number of processes loads them.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "ckpt/model_weights.hpp"
#include "train/model/model.hpp"

namespace accel::ckpt {

// What a saved model holds (stored_model's tensors, each tied group under its first name, and the ties) in
// the order its values come: the tensors the model holds whole first, then its sharded parameters unit by
// unit. Sharded parameters' tensors here hold no values (their shapes and dtypes are right).
StoredModel stored_layout(const train::Model& model);

// Hands every stored tensor's value to `append`, in stored_layout's order. Collective under zero_stage 3:
// every rank calls it, and one with writer false only takes part in the gathers. What `append` throws is
// thrown once every unit has been gathered, so that no rank is left waiting in a gather.
void stream_stored_values(const train::Model& model, const StoredModel& layout, bool writer,
                          const std::function<void(const at::Tensor&)>& append);

// Every stored tensor's name and whole value handed to `each` in stored_layout's order on a process with keep
// (a gathered value lives for the call only: its unit's memory goes to the next one). Collective under
// zero_stage 3, as stream_stored_values, whose error rule it follows.
void for_each_stored_tensor(const train::Model& model, bool keep,
                            const std::function<void(const std::string&, const at::Tensor&)>& each);

// The model's weights as one safetensors file at path, its values streamed (stored_layout's order),
// committed once whole. Collective under zero_stage 3; only a writer writes.
void write_model_file(const train::Model& model, const std::string& path, bool writer);

// The model's files in directory (made if missing): model.safetensors, or above max_shard_size bytes shards
// and an index (model_layout.hpp), under temporary names (AtomicFile) committed only once all are written,
// the previous save's entry point removed first. Collective under zero_stage 3; only a writer writes.
// Returns the names of the files written (empty for a rank that is not the writer).
std::set<std::string> write_model_files(const train::Model& model, const std::string& directory,
                                        uint64_t max_shard_size, bool writer);

}  // namespace accel::ckpt
