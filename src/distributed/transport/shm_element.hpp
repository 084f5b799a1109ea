// The element types the shared-memory collectives carry, and how CPU tensors map to them: shared by the
// segment (shm_allreduce.hpp), its transport (shm_transport.hpp) and the leaders' Gloo group
// (c10d_transport.hpp), so that none of them needs another for it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <optional>

namespace accel::distributed {

enum class ShmElement { Float32, Float64, BFloat16, Float16 };

inline size_t shm_element_size(ShmElement type) {
  switch (type) {
    case ShmElement::Float32: return 4;
    case ShmElement::Float64: return 8;
    case ShmElement::BFloat16:
    case ShmElement::Float16: return 2;
  }
  return 1;
}

// The segment's element type of a CPU tensor; nullopt when it has none (not on the CPU, not a float type).
inline std::optional<ShmElement> shm_element(const at::Tensor& tensor) {
  if (!tensor.device().is_cpu()) return std::nullopt;
  switch (tensor.scalar_type()) {
    case at::kFloat: return ShmElement::Float32;
    case at::kDouble: return ShmElement::Float64;
    case at::kBFloat16: return ShmElement::BFloat16;
    case at::kHalf: return ShmElement::Float16;
    default: return std::nullopt;
  }
}

inline at::ScalarType scalar_type(ShmElement element) {
  switch (element) {
    case ShmElement::Float32: return at::kFloat;
    case ShmElement::Float64: return at::kDouble;
    case ShmElement::BFloat16: return at::kBFloat16;
    case ShmElement::Float16: return at::kHalf;
  }
  return at::kFloat;
}

}  // namespace accel::distributed
