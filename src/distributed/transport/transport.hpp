// How a process group's tensors travel between the ranks: the collectives every transport carries, each
// blocking and started (async). The transports: c10d's backend, Gloo or NCCL (c10d_transport.hpp), and the
// shared-memory segment of each node, which across nodes pairs with a Gloo group of the nodes' leaders
// (shm_transport.hpp). Every rank issues the same collectives in the same order, from one thread; started
// ones complete in the order they were started. Errors are accel::Error, worded alike whatever the
// transport (group_health.hpp): Timeout when a rank does not take part within the timeout, PeerFailed when
// one went away, InvalidState when the ranks are out of step or after an earlier failure (the group is then
// broken), ShapeMismatch when the ranks' element counts differ (the group stays usable).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

namespace accel::distributed {

enum class ReduceKind { Sum, Max };

// A collective in flight. wait() blocks until it is done, with the same errors as a blocking collective.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

// A collective that could not start; wait() reports why, as the others report their failures.
class FailedCollective final : public PendingCollective {
 public:
  explicit FailedCollective(std::exception_ptr error) : error_(std::move(error)) {}
  void wait() override { std::rethrow_exception(error_); }

 private:
  std::exception_ptr error_;
};

// A collective done when made: one with nothing to exchange (no elements, or a single rank).
class CompletedCollective final : public PendingCollective {
 public:
  void wait() override {}
};

// One member of a bucket to average: its slot in the bucket and where this rank's gradient is.
struct BucketMember {
  int64_t offset = 0;   // the slot's first element in the bucket
  int64_t numel = 0;
  at::Tensor gradient;  // this rank's contribution (undefined: zeros); may be the slot itself
  // Whether the member's average may be left in `gradient` instead of its slot (the gradient is this
  // backward's and may be overwritten); otherwise the gradient comes out untouched.
  bool receives = false;
};

// "Average this bucket": every rank's gradients divided by `divisor` and summed in rank order, each rank
// contributing the same members. The transport fills the bucket (the division on the way in reads and
// writes each gradient once); the result lands in the slots, or, where the transport reads a member's
// gradient in place, in the gradient itself (PendingAverage::deliver hides which).
struct BucketAverage {
  at::Tensor bucket;  // 1-d, contiguous, with a slot per member
  at::Tensor wire;    // when defined: a copy of the bucket in another (16-bit) type, which travels instead
  at::Tensor divisor;  // 0-d, of the bucket's type
  std::vector<BucketMember> members;
  // Runs once the bucket is filled, just before it goes to the other ranks (optional): where the time a
  // bucket spends in flight begins.
  std::function<void()> on_filled;
};

class PendingAverage : public PendingCollective {
 public:
  // Bytes copied from the gradients into the bucket when it started (a gradient that is its slot is
  // divided where it is: nothing copied).
  virtual int64_t copied_in() const = 0;
  // After wait(): member `member`'s average into `gradient` (defined, of the member's numel), where the
  // transport did not leave it there already; returns the bytes copied. A member whose gradient was
  // undefined, or that does not receive, has its whole average in its slot.
  virtual int64_t deliver(size_t member, at::Tensor& gradient) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Reduces `tensor` over the ranks in place. The tensor must stay alive and untouched until wait()
  // returns; on_complete (optional) runs on the transport's thread once the result is in.
  virtual std::unique_ptr<PendingCollective> allreduce_async(at::Tensor& tensor, ReduceKind kind, const char* what,
                                                             std::function<void()> on_complete = {}) = 0;
  // The bucket's average (BucketAverage). The bucket, the wire and the gradients must stay alive and
  // untouched until wait() returns.
  virtual std::unique_ptr<PendingAverage> average_async(BucketAverage average, const char* what,
                                                        std::function<void()> on_complete = {});
  // output (contiguous, 1-d) receives elements [rank * n, (rank + 1) * n) of the reduction of every rank's
  // `input` (contiguous, 1-d, world * n elements).
  virtual std::unique_ptr<PendingCollective> reduce_scatter_async(at::Tensor& output, const at::Tensor& input,
                                                                  ReduceKind kind, const char* what) = 0;
  // output (contiguous, 1-d, world * n elements) receives every rank's `input` (contiguous, 1-d, n elements)
  // in rank order.
  virtual std::unique_ptr<PendingCollective> all_gather_async(at::Tensor& output, const at::Tensor& input,
                                                              const char* what) = 0;

  // The blocking forms: started, then waited for, as a span of the timeline named `what`.
  void allreduce(at::Tensor& tensor, ReduceKind kind, const char* what);
  void reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceKind kind, const char* what);
  void all_gather(at::Tensor& output, const at::Tensor& input, const char* what);

  // Collective (every rank asks for the same numel): a 1-d tensor of `numel` uninitialised elements of
  // like's dtype that this transport reduces where it is, without copying it in and out; undefined when it
  // has none to give (the caller allocates as usual).
  virtual at::Tensor bucket_empty(int64_t numel, const at::Tensor& like);
  // Whether it can all-reduce bfloat16 tensors.
  virtual bool carries_bfloat16() const = 0;
  // CPU time used so far by a thread of the transport's own that carries collectives (0 without one).
  virtual double helper_cpu_seconds() const { return 0; }
};

// The bucket filled as every transport sends it: each member's gradient divided by the divisor into its
// slot (zeros for none), but for the bucket's elements [skip_begin, skip_end); returns the bytes copied.
int64_t fill_bucket(const BucketAverage& average, int64_t skip_begin = 0, int64_t skip_end = 0);

// average_async as any transport can do it: the whole bucket filled (and copied to the wire), then
// all-reduced by `transport`; deliver copies each slot out.
std::unique_ptr<PendingAverage> average_in_bucket(Transport& transport, BucketAverage average, const char* what,
                                                  std::function<void()> on_complete);

// `first`, then, once it is done, `tensor` all-reduced (summed) through `then`: hybrid sharding's reduce-scatter
// within a node followed by the sum over the nodes. wait() waits for both, with their errors; `tensor` (first's
// output) must stay alive and untouched until it returns, and `what` must outlive it.
std::unique_ptr<PendingCollective> then_allreduce(std::unique_ptr<PendingCollective> first, Transport& then,
                                                  at::Tensor tensor, const char* what);

}  // namespace accel::distributed
