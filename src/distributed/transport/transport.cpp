#include "distributed/transport/transport.hpp"

#include <ATen/ops/div.h>

#include <algorithm>
#include <utility>

#include "core/timeline.hpp"

namespace accel::distributed {

namespace {

// The bucket's whole average in its slots, all-reduced as one tensor.
class PendingBucketAverage final : public PendingAverage {
 public:
  PendingBucketAverage(BucketAverage average, int64_t copied, std::unique_ptr<PendingCollective> sent)
      : average_(std::move(average)), copied_(copied), sent_(std::move(sent)) {}

  void wait() override {
    sent_->wait();
    if (average_.wire.defined()) average_.bucket.copy_(average_.wire);
  }
  int64_t copied_in() const override { return copied_; }
  int64_t deliver(size_t member, at::Tensor& gradient) override {
    const BucketMember& slot_of = average_.members[member];
    const auto slot = average_.bucket.narrow(0, slot_of.offset, slot_of.numel);
    gradient.copy_(slot.view(gradient.sizes()));
    return slot.numel() * static_cast<int64_t>(slot.element_size());
  }

 private:
  BucketAverage average_;
  int64_t copied_;
  std::unique_ptr<PendingCollective> sent_;
};

}  // namespace

int64_t fill_bucket(const BucketAverage& average, int64_t skip_begin, int64_t skip_end) {
  int64_t copied = 0;
  for (const BucketMember& member : average.members) {
    const int64_t begin = member.offset, end = begin + member.numel;
    if (!member.gradient.defined()) {
      average.bucket.narrow(0, begin, member.numel).zero_();
      continue;
    }
    const auto flat_gradient = member.gradient.reshape({-1});
    // The member's elements before and after the skipped ones, as [from, to) runs.
    const std::pair<int64_t, int64_t> runs[] = {{begin, std::clamp(skip_begin, begin, end)},
                                                {std::clamp(skip_end, begin, end), end}};
    for (const auto& [from, to] : runs) {
      if (from >= to) continue;
      auto slot = average.bucket.narrow(0, from, to - from);
      const auto source = flat_gradient.narrow(0, from - begin, to - from);
      // Dividing first keeps the sum in range, as PyTorch's default DDP hook does (and fp16's narrow range
      // needs it more); div's out= form with a tensor divisor has a kernel of its own, where a Scalar divisor
      // would compute into a temporary and copy it over.
      at::div_out(slot, source, average.divisor);
      if (source.data_ptr() != slot.data_ptr()) copied += (to - from) * static_cast<int64_t>(flat_gradient.element_size());
    }
  }
  return copied;
}

std::unique_ptr<PendingAverage> average_in_bucket(Transport& transport, BucketAverage average, const char* what,
                                                  std::function<void()> on_complete) {
  const int64_t copied = fill_bucket(average);
  at::Tensor sent = average.wire.defined() ? average.wire.copy_(average.bucket) : average.bucket;
  if (average.on_filled) average.on_filled();
  auto pending = transport.allreduce_async(sent, ReduceKind::Sum, what, std::move(on_complete));
  return std::make_unique<PendingBucketAverage>(std::move(average), copied, std::move(pending));
}

std::unique_ptr<PendingAverage> Transport::average_async(BucketAverage average, const char* what,
                                                         std::function<void()> on_complete) {
  return average_in_bucket(*this, std::move(average), what, std::move(on_complete));
}

at::Tensor Transport::bucket_empty(int64_t, const at::Tensor&) { return {}; }

namespace {

class ThenAllreduce final : public PendingCollective {
 public:
  ThenAllreduce(std::unique_ptr<PendingCollective> first, Transport& then, at::Tensor tensor, const char* what)
      : first_(std::move(first)), then_(then), tensor_(std::move(tensor)), what_(what) {}
  // A second wait() returns at once, or throws the first one's error again.
  void wait() override {
    if (failed_) std::rethrow_exception(failed_);
    if (done_) return;
    try {
      first_->wait();
      then_.allreduce(tensor_, ReduceKind::Sum, what_);
    } catch (...) {
      failed_ = std::current_exception();
      throw;
    }
    done_ = true;
  }

 private:
  std::unique_ptr<PendingCollective> first_;
  Transport& then_;
  at::Tensor tensor_;
  const char* what_;
  bool done_ = false;
  std::exception_ptr failed_;
};

}  // namespace

std::unique_ptr<PendingCollective> then_allreduce(std::unique_ptr<PendingCollective> first, Transport& then,
                                                  at::Tensor tensor, const char* what) {
  return std::make_unique<ThenAllreduce>(std::move(first), then, std::move(tensor), what);
}

void Transport::allreduce(at::Tensor& tensor, ReduceKind kind, const char* what) {
  const timeline::Span span(what);
  allreduce_async(tensor, kind, what)->wait();
}

void Transport::reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceKind kind, const char* what) {
  const timeline::Span span(what);
  reduce_scatter_async(output, input, kind, what)->wait();
}

void Transport::all_gather(at::Tensor& output, const at::Tensor& input, const char* what) {
  const timeline::Span span(what);
  all_gather_async(output, input, what)->wait();
}

}  // namespace accel::distributed
