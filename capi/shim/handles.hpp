// What the opaque C handles hold.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "core/options.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "dist/state.hpp"
#include "train/accelerator.hpp"
#include "train/model.hpp"

struct accel_options {
  accel::Options options;
  std::string dump;
};

struct accel_state {
  std::shared_ptr<accel::dist::State> state;
};

struct accel_tensor {
  explicit accel_tensor(at::Tensor t) : tensor(std::move(t)), shape(tensor.sizes().vec()), device(tensor.device().str()) {}
  at::Tensor tensor;
  std::vector<int64_t> shape;
  std::string device;
};

struct accel_bytes_list {
  std::vector<std::string> entries;
};

struct accel_dataset {
  std::shared_ptr<accel::data::Dataset> dataset;             // map-style, or
  std::shared_ptr<accel::data::IterableDataset> iterable;  // iterable
};

struct accel_loader {
  std::unique_ptr<accel::data::Loader> loader;
  std::string saved_state;
};

struct accel_batch {
  accel::data::NamedTensors fields;
};

struct accel_sample {
  accel::data::NamedTensors fields;
};

struct accel_model {
  std::shared_ptr<accel::train::Model> model;
  std::vector<std::string> parameter_names;  // cached for accessors that return names
  std::vector<std::string> buffer_names;
};

struct accel_output {
  accel::train::ModelOutput output;
};

struct accel_optimizer {
  std::shared_ptr<accel::train::AcceleratedOptimizer> optimizer;
  std::shared_ptr<accel::train::Model> model;
};

struct accel_scheduler {
  std::unique_ptr<accel::train::AcceleratedScheduler> scheduler;
};
