#include "core/value_ranges.hpp"

#include <ATen/Dispatch.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <vector>

namespace accel {
namespace {

// One recorded copy: its memory (held weakly, so that the address stays unique while the entry lives),
// the span of elements it covers, its dtype and version.
struct Recorded {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  const c10::StorageImpl* key;
  at::ScalarType dtype;
  int64_t begin;
  int64_t end;
  int64_t version;
  ValueRange range;
};

// A step copies a few tensors; the ranges of the last few dozen copies serve any loop that keeps some
// batches ahead (prefetching) or resident.
constexpr size_t kCapacity = 64;

struct Registry {
  std::mutex mutex;
  std::vector<Recorded> recorded;
};

// Never destroyed: a loader's prefetch thread may still copy a batch while the process exits.
Registry& registry() {
  static auto* instance = new Registry();
  return *instance;
}

// The elements [begin, end) of its storage that a strided tensor can reach; nullopt when a stride is
// negative or the tensor is empty.
std::optional<std::pair<int64_t, int64_t>> span_of(const at::Tensor& tensor) {
  if (tensor.numel() == 0) return std::nullopt;
  int64_t last = tensor.storage_offset();
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    if (tensor.stride(d) < 0) return std::nullopt;
    last += (tensor.size(d) - 1) * tensor.stride(d);
  }
  return std::make_pair(tensor.storage_offset(), last + 1);
}

// Recordable: a tensor with storage whose version can be read (inference tensors have none).
bool trackable(const at::Tensor& tensor) {
  return tensor.defined() && tensor.has_storage() && !tensor.is_inference() &&
         at::isIntegralType(tensor.scalar_type(), /*includeBool=*/false);
}

template <typename T>
ValueRange range_of(const T* values, int64_t count) {
  T low = values[0], high = values[0];
  for (int64_t i = 1; i < count; ++i) {
    low = std::min(low, values[i]);
    high = std::max(high, values[i]);
  }
  ValueRange range{static_cast<int64_t>(low), static_cast<int64_t>(high), std::nullopt, std::nullopt};
  if (low == high) return range;
  // One more pass only when there is a second value: the extremes without the first ones.
  T above_low = high, below_high = low;
  for (int64_t i = 0; i < count; ++i) {
    if (values[i] > low) above_low = std::min(above_low, values[i]);
    if (values[i] < high) below_high = std::max(below_high, values[i]);
  }
  range.above_low = static_cast<int64_t>(above_low);
  range.below_high = static_cast<int64_t>(below_high);
  return range;
}

}  // namespace

bool ValueRange::within(int64_t min, int64_t max, int64_t excluded) const {
  // Without `excluded` the values keep their extremes, unless `excluded` is one of them.
  std::optional<int64_t> rest_low = low, rest_high = high;
  if (low == excluded) rest_low = above_low;
  if (high == excluded) rest_high = below_high;
  if (!rest_low || !rest_high) return true;  // nothing but `excluded`
  return *rest_low >= min && *rest_high <= max;
}

std::optional<ValueRange> value_range_of(const at::Tensor& cpu_tensor) {
  if (!trackable(cpu_tensor) || !cpu_tensor.is_cpu() || cpu_tensor.numel() == 0) return std::nullopt;
  const auto contiguous = cpu_tensor.contiguous();
  std::optional<ValueRange> range;
  AT_DISPATCH_INTEGRAL_TYPES(contiguous.scalar_type(), "value_range_of",
                             [&] { range = range_of(contiguous.data_ptr<scalar_t>(), contiguous.numel()); });
  return range;
}

at::Tensor copy_to_device(const at::Tensor& source, const c10::Device& device, bool non_blocking) {
  auto copy = source.to(device, non_blocking);
  if (source.is_cpu() && !copy.is_cpu() && trackable(copy)) {
    if (const auto range = value_range_of(source)) remember_value_range(copy, *range);
  }
  return copy;
}

void copy_keeping_range(const at::Tensor& destination, const at::Tensor& source, bool non_blocking) {
  const auto range = source.is_cpu() ? value_range_of(source) : known_value_range(source);
  destination.copy_(source, non_blocking);
  if (range) remember_value_range(destination, *range);
}

void remember_value_range(const at::Tensor& copy, const ValueRange& range) {
  if (!trackable(copy)) return;
  const auto span = span_of(copy);
  if (!span) return;
  Recorded entry{copy.storage().getWeakStorageImpl(),
                 copy.storage().unsafeGetStorageImpl(),
                 copy.scalar_type(),
                 span->first,
                 span->second,
                 copy._version(),
                 range};
  auto& [mutex, recorded] = registry();
  const std::lock_guard<std::mutex> lock(mutex);
  recorded.erase(std::remove_if(recorded.begin(), recorded.end(),
                                [&](const Recorded& old) { return old.storage.expired() || old.key == entry.key; }),
                 recorded.end());
  if (recorded.size() >= kCapacity) recorded.erase(recorded.begin());
  recorded.push_back(std::move(entry));
}

std::optional<ValueRange> known_value_range(const at::Tensor& tensor) {
  if (!trackable(tensor)) return std::nullopt;
  const auto span = span_of(tensor);
  if (!span) return std::nullopt;
  const auto* key = tensor.storage().unsafeGetStorageImpl();
  const int64_t version = tensor._version();
  auto& [mutex, recorded] = registry();
  const std::lock_guard<std::mutex> lock(mutex);
  for (const auto& entry : recorded) {
    if (entry.key == key && !entry.storage.expired() && entry.dtype == tensor.scalar_type() &&
        entry.version == version && entry.begin <= span->first && span->second <= entry.end) {
      return entry.range;
    }
  }
  return std::nullopt;
}

void forget_value_ranges(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  const auto* key = tensor.storage().unsafeGetStorageImpl();
  auto& [mutex, recorded] = registry();
  const std::lock_guard<std::mutex> lock(mutex);
  recorded.erase(std::remove_if(recorded.begin(), recorded.end(), [&](const Recorded& entry) { return entry.key == key; }),
                 recorded.end());
}

}  // namespace accel
