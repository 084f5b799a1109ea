// The reductions of the shared-memory collectives (shm_allreduce.hpp): elements [lo, hi) of every rank's
// slot combined in rank order 0..n-1, a chunk at a time so that the chunk of every slot stays in cache.
// `out_base` receives element i as its element i - out_first: rank 0's slot itself for an all-reduce
// (out_first 0), the caller's output for a reduce-scatter. Included by shm_allreduce.cpp only (built -O3).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "distributed/shm/shm_allreduce.hpp"

namespace accel::distributed::shm_kernels {

// Elements reduced at a time.
constexpr int64_t kChunk = 2048;

template <class T>
T combine(T a, T b, ReduceKind kind) {
  return kind == ReduceKind::Sum ? a + b : std::max(a, b);
}

template <class T>
void reduce_native(char* const* slots, int32_t world, int64_t lo, int64_t hi, ReduceKind kind, char* out_base,
                   int64_t out_first) {
  const bool in_place = out_base == slots[0] && out_first == 0;
  for (int64_t start = lo; start < hi; start += kChunk) {
    const int64_t n = std::min(hi - start, kChunk);
    T* out = reinterpret_cast<T*>(out_base) + (start - out_first);
    if (!in_place) std::memcpy(out, reinterpret_cast<const T*>(slots[0]) + start, static_cast<size_t>(n) * sizeof(T));
    for (int32_t r = 1; r < world; ++r) {
      const T* in = reinterpret_cast<const T*>(slots[r]) + start;
      if (kind == ReduceKind::Sum) {
        for (int64_t i = 0; i < n; ++i) out[i] += in[i];
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = std::max(out[i], in[i]);
      }
    }
  }
}

// Half types add up in float and are rounded once (for two ranks what Gloo's float16 sum gives).
template <class T>
void reduce_widened(char* const* slots, int32_t world, int64_t lo, int64_t hi, ReduceKind kind, char* out_base,
                    int64_t out_first) {
  float acc[kChunk];
  T* out = reinterpret_cast<T*>(out_base);
  for (int64_t start = lo; start < hi; start += kChunk) {
    const int64_t n = std::min(hi - start, kChunk);
    const T* first = reinterpret_cast<const T*>(slots[0]) + start;
    for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<float>(first[i]);
    for (int32_t r = 1; r < world; ++r) {
      const T* in = reinterpret_cast<const T*>(slots[r]) + start;
      for (int64_t i = 0; i < n; ++i) acc[i] = combine(acc[i], static_cast<float>(in[i]), kind);
    }
    T* to = out + (start - out_first);
    for (int64_t i = 0; i < n; ++i) to[i] = static_cast<T>(acc[i]);
  }
}

// The average's elements [lo, hi): in rank order, every other rank's (divided already, in its slot) and this
// rank's own (divided here), summed; the sum goes to this rank's private memory and every other rank's slot.
// Dividing here gives what dividing beforehand gives: IEEE division either way.
template <class T>
void reduce_private_average(char* const* slots, int32_t world, int32_t me, const PrivateAverage& average, int64_t lo,
                            int64_t hi) {
  const T divisor = static_cast<T>(average.divisor);
  T sum[kChunk];
  for (const auto& run : average.own) {
    const int64_t begin = std::max(run.begin, lo), end = std::min(run.end, hi);
    for (int64_t start = begin; start < end; start += kChunk) {
      const int64_t n = std::min(end - start, kChunk);
      T* own = static_cast<T*>(run.data) + (start - run.begin);
      for (int32_t r = 0; r < world; ++r) {
        if (r == me) {
          if (r == 0) {
            for (int64_t i = 0; i < n; ++i) sum[i] = own[i] / divisor;
          } else {
            for (int64_t i = 0; i < n; ++i) sum[i] += own[i] / divisor;
          }
        } else {
          const T* in = reinterpret_cast<const T*>(slots[r]) + start;
          if (r == 0) {
            std::memcpy(sum, in, static_cast<size_t>(n) * sizeof(T));
          } else {
            for (int64_t i = 0; i < n; ++i) sum[i] += in[i];
          }
        }
      }
      std::memcpy(own, sum, static_cast<size_t>(n) * sizeof(T));
      for (int32_t r = 0; r < world; ++r) {
        if (r != me) std::memcpy(reinterpret_cast<T*>(slots[r]) + start, sum, static_cast<size_t>(n) * sizeof(T));
      }
    }
  }
}

}  // namespace accel::distributed::shm_kernels
