// Data-parallel gradient synchronisation (PyTorch DDP's Reducer, rebuilt on autograd's grad-accumulator
// hooks): gradients are grouped in buckets, and each bucket's all-reduce starts as soon as its last
// gradient is accumulated, so communication overlaps the rest of backward. When backward returns, every
// gradient holds the average over the ranks.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/state.hpp"

namespace accel::train {

struct ReducerConfig {
  int64_t first_bucket_bytes = 1 << 20;   // small, so that the first all-reduce starts early
  int64_t bucket_bytes = 25 << 20;
  bool find_unused_parameters = false;
  // DDP's gradient_as_bucket_view: each gradient becomes a view into its bucket's buffer, so the averaged
  // values are not copied back and no second copy of the gradients is kept.
  bool gradient_as_bucket_view = false;
  // DDP's static_graph: the parameters that get no gradient are the same in every backward, so they are
  // allowed without find_unused_parameters (their slots average zeros); a backward whose set differs from
  // the first one's is an error naming the parameters.
  bool static_graph = false;
};

class Reducer {
 public:
  // Buckets take the parameters in reverse order of registration (the order backward produces them).
  Reducer(std::shared_ptr<distributed::State> state, std::vector<std::pair<std::string, at::Tensor>> parameters,
          ReducerConfig config);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Called before each forward: whether the coming backward synchronises (false while accumulating, when
  // gradients only add up locally).
  void prepare_for_backward(bool sync);

  // Buckets as lists of parameter names, in launch order.
  std::vector<std::vector<std::string>> bucket_names() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace accel::train
