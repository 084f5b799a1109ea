#include "core/field_index.hpp"

#include "core/error.hpp"

namespace accel {

void check_field_name(const std::string& name) {
  if (name.empty()) fail(Code::InvalidArgument, "a field name may not be empty");
}

std::string list_field_names(const NamedTensors& fields) {
  constexpr size_t kShown = 20;
  std::string known;
  for (size_t i = 0; i < fields.size() && i < kShown; ++i) known += (i ? ", " : "") + fields[i].first;
  if (fields.size() > kShown) known += ", ... (" + std::to_string(fields.size() - kShown) + " more)";
  return known;
}

IndexedFields::IndexedFields(NamedTensors fields) : fields_(std::move(fields)) {
  positions_.reserve(fields_.size());
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (!positions_.emplace(fields_[i].first, i).second) {
      fail(Code::InvalidArgument, "the name '" + fields_[i].first + "' appears twice");
    }
  }
}

const at::Tensor& IndexedFields::named(const std::string& name, const std::string& what) const {
  const auto found = positions_.find(name);
  if (found == positions_.end()) {
    fail(Code::InvalidArgument, what + " has no '" + name + "' (it has: " + list_field_names(fields_) + ")");
  }
  return fields_[found->second].second;
}

}  // namespace accel
