// Tensors with names, in order: a batch's fields, a model's parameters, forward's keyword arguments,
// the contents of a .safetensors file. One type for all of them, so they pass between areas unconverted.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace accel {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Appends a field; Error(InvalidArgument) when the name is empty (check_field_name, core/field_index.hpp)
// or already there.
void add_field(NamedTensors& fields, const std::string& name, const at::Tensor& tensor);
// The tensor called name; Error(InvalidArgument) naming `what` and listing (the first twenty of) the names
// it has otherwise. A linear search: for lookups among many fields, IndexedFields (core/field_index.hpp).
const at::Tensor& field_named(const NamedTensors& fields, const std::string& name, const std::string& what);

}  // namespace accel
