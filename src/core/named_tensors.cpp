#include "core/named_tensors.hpp"

#include "core/error.hpp"
#include "core/field_index.hpp"

namespace accel {

void add_field(NamedTensors& fields, const std::string& name, const at::Tensor& tensor) {
  check_field_name(name);
  for (const auto& field : fields) {
    if (field.first == name) fail(Code::InvalidArgument, "the name '" + name + "' appears twice");
  }
  fields.emplace_back(name, tensor);
}

const at::Tensor& field_named(const NamedTensors& fields, const std::string& name, const std::string& what) {
  for (const auto& field : fields) {
    if (field.first == name) return field.second;
  }
  fail(Code::InvalidArgument, what + " has no '" + name + "' (it has: " + list_field_names(fields) + ")");
}

}  // namespace accel
