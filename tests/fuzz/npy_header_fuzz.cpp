// The .npy parser on arbitrary file contents. An accel::Error is a refusal, which is fine; a crash, a
// sanitizer report or any other exception is a finding. What it accepts must keep the promise the data
// loader relies on when it copies rows: the view lies inside the input and its size matches its shape.
#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "formats/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using accel::formats::ArrayView;
  try {
    const ArrayView view = accel::formats::parse_npy(data, size, "fuzz.npy");
    const auto* begin = static_cast<const uint8_t*>(view.data);
    if (begin < data || view.nbytes > size || begin > data + size - view.nbytes) __builtin_trap();
    if (accel::formats::array_nbytes(view.shape, c10::elementSize(view.dtype)) != view.nbytes) __builtin_trap();
    if (!view.shape.empty() && view.shape[0] > 0) {
      const ArrayView last = accel::formats::row_slice(view, view.shape[0] - 1, 1);
      if (static_cast<const uint8_t*>(last.data) + last.nbytes != begin + view.nbytes) __builtin_trap();
    }
  } catch (const accel::Error&) {
  }
  return 0;
}
