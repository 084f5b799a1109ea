// Overflow-checked arithmetic on tensor layouts whose numbers come from outside (a DLPack struct, a C
// array, a model file), done before LibTorch relies on them: LibTorch 1.13 computes storage sizes in
// noexcept code, where a negative stride or an overflow terminates the process, and it trusts that a
// loaded storage is as large as its tensors say. Each function throws Error(InvalidArgument) with a
// message that starts with `what` and names the offending value.
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace accel {

// The number of elements. Refuses a negative size, and a shape whose sizes multiply past int64 even with
// its zero sizes counted as one (its contiguous strides are such a product).
int64_t checked_numel(c10::IntArrayRef sizes, const std::string& what);

// C-contiguous strides, for sizes that checked_numel accepted.
std::vector<int64_t> contiguous_strides(c10::IntArrayRef sizes);

// Bytes from the start of the storage to the end of the last element: 0 without elements, else
// (storage_offset + 1 + sum over dims of (size - 1) * stride) * element_size. Refuses what checked_numel
// refuses, a negative stride or storage offset, and a result past int64.
int64_t checked_storage_bytes(c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t storage_offset,
                              size_t element_size, const std::string& what);

// "[2, 3]", for messages.
std::string shape_string(c10::IntArrayRef sizes);

}  // namespace accel
