// What accel knows of the values of integer tensors it copied from host memory to another device.
//
// A loss must refuse a class target outside [0, classes) before a GPU sees it: there an out-of-range class
// ends in a device-side assert that leaves the CUDA context unusable. Reading a GPU tensor's extremes
// back costs a synchronisation every step, which on a small model is a tenth of the step (measured on an
// H100). Where accel itself copies an integer tensor from the host (send_to_device, the loader's device
// placement), the values are at hand on the CPU: their range is recorded with the copy, and the loss looks
// it up instead of reading the GPU.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

namespace accel {

// The extremes of a set of integer values, and the extremes of what remains without them, so that one
// excluded value (a loss's ignore_index, such as -100 or 255) can be left out at either end.
struct ValueRange {
  int64_t low = 0;
  int64_t high = 0;
  std::optional<int64_t> above_low;   // the smallest value greater than low, if any
  std::optional<int64_t> below_high;  // the largest value less than high, if any

  // Whether every value but `excluded` lies in [min, max].
  bool within(int64_t min, int64_t max, int64_t excluded) const;
};

// The range of a CPU integer tensor's values (std::nullopt for an empty or non-integer tensor).
std::optional<ValueRange> value_range_of(const at::Tensor& cpu_tensor);

// source.to(device, non_blocking), remembering the copy's value range when it takes an integer tensor
// from the CPU to another device. Thread-safe.
at::Tensor copy_to_device(const at::Tensor& source, const c10::Device& device, bool non_blocking);

// destination.copy_(source, non_blocking), with the range of what was copied recorded for destination: the
// source's values when it is on the CPU, else its own recorded range (none: none recorded). For static
// tensors that take a new batch each step, such as a captured CUDA graph's inputs. Thread-safe.
void copy_keeping_range(const at::Tensor& destination, const at::Tensor& source, bool non_blocking);

// Records `range` as the values of `copy` as they are now. Thread-safe.
void remember_value_range(const at::Tensor& copy, const ValueRange& range);

// The recorded range that bounds every element of `tensor`: found when its elements lie within a
// recorded tensor's memory (the tensor itself, a view or a slice of it, of the same dtype) and no write
// through LibTorch changed them since (their version counter, which views share, is unchanged).
// Thread-safe.
std::optional<ValueRange> known_value_range(const at::Tensor& tensor);

// Forgets every range recorded over `tensor`'s memory: for memory handed to code that may write to it
// behind LibTorch's version counter (a DLPack export). Thread-safe.
void forget_value_ranges(const at::Tensor& tensor);

}  // namespace accel
