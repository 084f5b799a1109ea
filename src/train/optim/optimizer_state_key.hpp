// The key torch::optim files a parameter's state under, for code that reads or writes an optimizer's
// state() directly: the TensorImpl's address printed as a string in LibTorch 1.13, the address itself in
// 2.x (where c10::guts::to_string, 1.13's printer, is gone).
#pragma once

#include <ATen/core/Tensor.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace accel::train {

// A template on the state map, so that only the branch of the LibTorch at hand is compiled.
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const StateMap&, const at::Tensor& parameter) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream printed;
    printed << parameter.unsafeGetTensorImpl();
    return printed.str();
  } else {
    return Key(parameter.unsafeGetTensorImpl());
  }
}

}  // namespace accel::train
