// Field names: the rule every named field follows, and lookups by name that stay fast among many fields.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/named_tensors.hpp"

namespace accel {

// Error(InvalidArgument) for an empty field name, which no lookup could tell from a missing one.
void check_field_name(const std::string& name);

// The "(it has: a, b, ...)" part of a message about a missing name: the first twenty names, then how
// many more (a batch may have thousands).
std::string list_field_names(const NamedTensors& fields);

// Named tensors with their names indexed: a lookup by name takes constant time however many fields there
// are (a batch of 200,000 fields took 9.6 ms a lookup by linear search).
class IndexedFields {
 public:
  // Error(InvalidArgument) when a name appears twice.
  explicit IndexedFields(NamedTensors fields);
  // Movable only: the index points at the names in fields_, whose storage a move keeps.
  IndexedFields(IndexedFields&&) = default;
  IndexedFields& operator=(IndexedFields&&) = default;
  IndexedFields(const IndexedFields&) = delete;
  IndexedFields& operator=(const IndexedFields&) = delete;

  size_t size() const { return fields_.size(); }
  const std::pair<std::string, at::Tensor>& operator[](size_t index) const { return fields_[index]; }
  // The tensor called name; Error(InvalidArgument) naming `what` and listing the names it has otherwise.
  const at::Tensor& named(const std::string& name, const std::string& what) const;

 private:
  NamedTensors fields_;
  std::unordered_map<std::string_view, size_t> positions_;
};

}  // namespace accel
