// What the opaque C handles hold. Each starts with ACCEL_HANDLE, the tag naming its kind (see shim/guard.hpp):
// first, so that a check of any handle reads only its first word. A handle is brace-initialised with `{}`
// for the tag: `new accel_model{{}, model}`.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "accelerator/accelerator.hpp"
#include "core/field_index.hpp"
#include "core/options.hpp"
#include "data/dataset.hpp"
#include "data/dealer.hpp"
#include "data/loader.hpp"
#include "distributed/state.hpp"
#include "shim/guard.hpp"
#include "tracking/progress.hpp"
#include "train/model/model.hpp"
#include "train/step/train_step.hpp"
#include "train/training_loop.hpp"

#define ACCEL_HANDLE(c_name)                                                   \
  static constexpr const char* kName = c_name;                                 \
  static constexpr uint64_t kKind = accel::capi::handle_kind(c_name);          \
  accel::capi::KindTag<kKind> tag

struct accel_options {
  ACCEL_HANDLE("accel_options_t");
  accel::Options options;
};

namespace accel::capi {

// The settings an optional options argument carries: nullptr for NULL, an error for a dead handle.
inline const Options* settings_of(const accel_options* options) {
  if (options == nullptr) return nullptr;
  require(options, "options");
  return &options->options;
}

}  // namespace accel::capi

struct accel_state {
  ACCEL_HANDLE("accel_state_t");
  // Each handle is one Accelerator over the process state every handle shares (accelerator->state()).
  std::shared_ptr<accel::Accelerator> accelerator;
};

struct accel_tensor {
  ACCEL_HANDLE("accel_tensor_t");
  explicit accel_tensor(at::Tensor t) : tensor(std::move(t)), shape(tensor.sizes().vec()), device(tensor.device().str()) {}
  at::Tensor tensor;
  std::vector<int64_t> shape;
  std::string device;
};

namespace accel::capi {

// The tensors of a C array of count handles (NULL when count is 0); argument is its parameter name.
inline std::vector<at::Tensor> tensors_of(accel_tensor* const* tensors, size_t count, const std::string& argument) {
  if (count > 0) require(tensors, argument.c_str());
  std::vector<at::Tensor> list;
  for (size_t i = 0; i < count; ++i) {
    require(tensors[i], (argument + "[i]").c_str());
    list.push_back(tensors[i]->tensor);
  }
  return list;
}

// The named tensors of two parallel C arrays, names[i] naming tensors[i] for i < count (either array may
// be NULL when count is 0); tensors_argument is the tensors' parameter name, for messages.
inline NamedTensors named_tensors(const char* const* names, accel_tensor* const* tensors, size_t count,
                                  const std::string& tensors_argument) {
  if (count > 0) {
    require(names, "names");
    require(tensors, tensors_argument.c_str());
  }
  NamedTensors fields;
  for (size_t i = 0; i < count; ++i) {
    require(names[i], "names[i]");
    require(tensors[i], (tensors_argument + "[i]").c_str());
    fields.emplace_back(names[i], tensors[i]->tensor);
  }
  return fields;
}

}  // namespace accel::capi

struct accel_sink {
  ACCEL_HANDLE("accel_sink_t");
  std::string bytes;
};

struct accel_parts {
  ACCEL_HANDLE("accel_parts_t");
  const accel::ckpt::SavedParts* parts;
  std::string current;  // the part last read, which the caller's pointer describes
};

struct accel_bytes_list {
  ACCEL_HANDLE("accel_bytes_list_t");
  std::vector<std::string> entries;
};

struct accel_dataset {
  ACCEL_HANDLE("accel_dataset_t");
  std::shared_ptr<accel::data::Dataset> dataset;             // map-style, or
  std::shared_ptr<accel::data::IterableDataset> iterable;  // iterable
};

struct accel_loader {
  ACCEL_HANDLE("accel_loader_t");
  std::unique_ptr<accel::data::Loader> loader;
  std::string saved_state;
};

struct accel_dealer {
  ACCEL_HANDLE("accel_dealer_t");
  std::unique_ptr<accel::data::Dealer> dealer;
  accel::data::Batch handed_out;  // the batch accel_dealer_next last gave, which the caller reads
};

struct accel_batch {
  ACCEL_HANDLE("accel_batch_t");
  accel::IndexedFields fields;
};

struct accel_sample {
  ACCEL_HANDLE("accel_sample_t");
  accel::NamedTensors fields;
};

struct accel_model {
  ACCEL_HANDLE("accel_model_t");
  std::shared_ptr<accel::train::Model> model;
  // The training half of the Accelerator that prepared it (accel_state_prepare_model): its optimizers'.
  std::shared_ptr<accel::train::TrainingLoop> prepared_by = {};
};

struct accel_output {
  ACCEL_HANDLE("accel_output_t");
  accel::train::ModelOutput output;
};

struct accel_optimizer {
  ACCEL_HANDLE("accel_optimizer_t");
  std::shared_ptr<accel::train::AcceleratedOptimizer> optimizer;
  std::shared_ptr<accel::train::Model> model;
};

struct accel_train_step {
  ACCEL_HANDLE("accel_train_step_t");
  std::unique_ptr<accel::train::TrainStep> step;
};

struct accel_scheduler {
  ACCEL_HANDLE("accel_scheduler_t");
  std::unique_ptr<accel::train::AcceleratedScheduler> scheduler;
};

struct accel_progress {
  ACCEL_HANDLE("accel_progress_t");
  std::unique_ptr<accel::tracking::ProgressBar> bar;
};
