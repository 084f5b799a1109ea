// then_allreduce (distributed/transport/transport.hpp), hybrid sharding's reduce-scatter within a node followed
// by the sum over the nodes: the sum runs once the first collective is done, once however often wait() is
// called, and a failure of either is thrown by every wait() after it, never taken for success.
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "distributed/transport/transport.hpp"

namespace accel::distributed {
namespace {

// A collective that is done at once, or throws at its wait.
class Done final : public PendingCollective {
 public:
  explicit Done(bool fails) : fails_(fails) {}
  void wait() override {
    if (fails_) throw std::runtime_error("the first collective failed");
  }

 private:
  bool fails_;
};

// A transport whose all-reduce doubles the tensor (the sum of two equal ranks) or throws; counts its calls.
class Doubling final : public Transport {
 public:
  explicit Doubling(bool fails) : fails_(fails) {}
  int allreduces = 0;
  std::unique_ptr<PendingCollective> allreduce_async(at::Tensor& tensor, ReduceKind, const char*,
                                                     std::function<void()>) override {
    ++allreduces;
    if (fails_) return std::make_unique<Done>(true);
    tensor.mul_(2);
    return std::make_unique<Done>(false);
  }
  std::unique_ptr<PendingCollective> reduce_scatter_async(at::Tensor&, const at::Tensor&, ReduceKind, const char*) override {
    return std::make_unique<Done>(true);
  }
  std::unique_ptr<PendingCollective> all_gather_async(at::Tensor&, const at::Tensor&, const char*) override {
    return std::make_unique<Done>(true);
  }
  bool carries_bfloat16() const override { return true; }

 private:
  bool fails_;
};

TEST(ThenAllreduce, SumsOnceAfterTheFirstCollective) {
  Doubling across(false);
  const at::Tensor chunk = at::ones({4});
  auto pending = then_allreduce(std::make_unique<Done>(false), across, chunk, "test");
  EXPECT_EQ(across.allreduces, 0) << "summed before the first collective was waited for";
  pending->wait();
  pending->wait();
  EXPECT_EQ(across.allreduces, 1);
  EXPECT_TRUE(chunk.equal(at::full({4}, 2.0)));
}

TEST(ThenAllreduce, AFailureIsThrownByEveryWait) {
  for (const bool first_fails : {true, false}) {
    Doubling across(!first_fails);
    auto pending = then_allreduce(std::make_unique<Done>(first_fails), across, at::ones({4}), "test");
    EXPECT_THROW(pending->wait(), std::runtime_error);
    EXPECT_THROW(pending->wait(), std::runtime_error) << "a second wait took the failure for success";
    EXPECT_EQ(across.allreduces, first_fails ? 0 : 1);
  }
}

}  // namespace
}  // namespace accel::distributed
