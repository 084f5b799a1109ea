#include "core/named_tensors.hpp"

#include "core/error.hpp"

namespace accel {

void add_field(NamedTensors& fields, const std::string& name, const at::Tensor& tensor) {
  for (const auto& field : fields) {
    if (field.first == name) fail(Code::InvalidArgument, "the name '" + name + "' appears twice");
  }
  fields.emplace_back(name, tensor);
}

const at::Tensor& field_named(const NamedTensors& fields, const std::string& name, const std::string& what) {
  std::string known;
  for (const auto& field : fields) {
    if (field.first == name) return field.second;
    known += (known.empty() ? "" : ", ") + field.first;
  }
  fail(Code::InvalidArgument, what + " has no '" + name + "' (it has: " + known + ")");
}

}  // namespace accel
