// Gradient synchronisation on every rank under `accel launch`, through the C++ core: the overlap figures
// (GradSyncStats.*) and gradient compression (GradCompression.*), run by tests/CMakeLists.txt on 2 and 3
// processes with ACCEL_INTRA_NODE_TRANSPORT=shm and =gloo (where LibTorch 1.13's Gloo refuses bf16).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "core_worker.hpp"
#include "distributed/collectives/collectives.hpp"
#include "distributed/group/process_group.hpp"
#include "expect_error.hpp"
#include "train/training_loop.hpp"

namespace {

using namespace accel;
using namespace accel::train;

using core_worker::load_mlp;
using core_worker::rank;
using core_worker::state;
using core_worker::world;

// The MLP 8-16-4's gradient bytes in fp32: w1 8x16, b1 16, w2 16x4, b2 4.
constexpr int64_t kGradientBytes = 4 * (128 + 16 + 64 + 4);

// One bucket per parameter (b2, w2, b1, w1 in launch order): the first three all-reduces can run while
// backward computes the rest.
PrepareConfig bucket_per_parameter(GradCompression compression = GradCompression::None) {
  PrepareConfig config;
  config.reducer.first_bucket_bytes = 4;
  config.reducer.bucket_bytes = 4;
  config.reducer.compression = compression;
  return config;
}

bool through_shared_memory() { return state->group("test")->uses_shared_memory(); }

// This rank's rows of a batch that differs between ranks.
at::Tensor rows(int64_t seed, int64_t columns) {
  at::manual_seed(seed * 100 + rank());
  return at::randn({32, columns});
}

at::Tensor output_of(Model& model, const at::Tensor& x) { return model.forward({x}, {}, true).values.front().second; }

// A data-parallel backward of the MSE on this rank's rows of step `seed`.
void backward_step(Model& model, int64_t seed) {
  auto loop = std::make_shared<TrainingLoop>(state);
  loop->accumulate();
  loop->backward(at::mse_loss(output_of(model, rows(seed, 8)), rows(seed + 1000, 4)));
}

// Every trainable parameter's gradient, flattened and joined in registration order.
at::Tensor flat_gradients(const Model& model) {
  std::vector<at::Tensor> parts;
  for (const auto& parameter : model.trainable_parameters()) parts.push_back(parameter.second.grad().reshape({-1}));
  return at::cat(parts);
}

void expect_equal(const GradSyncStats& a, const GradSyncStats& b) {
  EXPECT_EQ(a.syncs, b.syncs);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.copied_bytes, b.copied_bytes);
  EXPECT_EQ(a.reduce_ms, b.reduce_ms);
  EXPECT_EQ(a.overlapped_ms, b.overlapped_ms);
  EXPECT_EQ(a.exposed_ms, b.exposed_ms);
  EXPECT_EQ(a.wait_ms, b.wait_ms);
  EXPECT_EQ(a.helper_cpu_ms, b.helper_cpu_ms);
}

TEST(GradSyncStats, OverlappedAndExposedAddUpToTheReduceTime) {
  auto model = load_mlp("stats");
  model->prepare(state, bucket_per_parameter());
  constexpr int64_t kSteps = 6;
  for (int64_t step = 0; step < kSteps; ++step) backward_step(*model, step);
  const GradSyncReport report = model->grad_sync_report();
  const GradSyncStats& total = report.total;
  EXPECT_EQ(total.syncs, kSteps);
  EXPECT_EQ(total.bytes, kSteps * kGradientBytes);
  EXPECT_EQ(report.last.syncs, 1);
  EXPECT_EQ(report.last.bytes, kGradientBytes);
  EXPECT_GT(total.reduce_ms, 0);
  // The first three buckets start before backward's last gradient.
  EXPECT_GT(total.overlapped_ms, 0);
  EXPECT_LE(total.overlapped_ms, total.reduce_ms);
  EXPECT_GE(total.exposed_ms, 0);
  EXPECT_NEAR(total.overlapped_ms + total.exposed_ms, total.reduce_ms, 1e-6 * total.reduce_ms);
  // Measured on the waiting thread, which wakes once the all-reduce has ended (how much later depends on
  // the machine's load, so only this side is bounded).
  EXPECT_GE(total.wait_ms, total.exposed_ms - 1e-6);
  if (through_shared_memory()) {
    EXPECT_GT(total.helper_cpu_ms, 0);
  } else {
    EXPECT_EQ(total.helper_cpu_ms, 0);  // Gloo's threads are not measured
  }
  std::printf("rank %ld: %ld syncs: reduce %.3f ms, overlapped %.3f ms, exposed %.3f ms, wait %.3f ms, helper CPU %.3f ms\n",
              static_cast<long>(rank()), static_cast<long>(total.syncs), total.reduce_ms, total.overlapped_ms,
              total.exposed_ms, total.wait_ms, total.helper_cpu_ms);
}

TEST(GradSyncStats, AccumulatingBackwardsLeaveTheFiguresUnchanged) {
  auto model = load_mlp("no_sync");
  model->prepare(state, bucket_per_parameter());
  backward_step(*model, 0);
  const GradSyncReport before = model->grad_sync_report();
  model->set_no_sync(true);
  for (int64_t step = 1; step < 4; ++step) backward_step(*model, step);
  const GradSyncReport during = model->grad_sync_report();
  expect_equal(during.total, before.total);
  expect_equal(during.last, before.last);
  model->set_no_sync(false);
  backward_step(*model, 4);
  EXPECT_EQ(model->grad_sync_report().total.syncs, 2);
}

// Rank r's own gradient (no averaging), from an unprepared copy of the model, and every rank's in rank order.
at::Tensor every_ranks_gradient(const std::string& tag, int64_t seed) {
  auto local = load_mlp(tag + "_local");
  at::mse_loss(output_of(*local, rows(seed, 8)), rows(seed + 1000, 4)).backward();
  return distributed::gather(*state, flat_gradients(*local).unsqueeze(0));  // [world, parameters]
}

struct Averaged {
  at::Tensor gradient;
  GradSyncReport report;
};

Averaged averaged(const std::string& tag, GradCompression compression, int64_t seed) {
  auto model = load_mlp(tag);
  model->prepare(state, bucket_per_parameter(compression));
  backward_step(*model, seed);
  return {flat_gradients(*model), model->grad_sync_report()};
}

// The bound documented in train/ddp/reducer.hpp and accel/model.h, for each element:
// n * u * mean_r |g_r|, plus n * 2^-25 for fp16's subnormals.
void expect_within_documented_error(GradCompression compression, double u, double subnormal_step) {
  const std::string tag = compression == GradCompression::Bf16 ? "bf16" : "fp16";
  const at::Tensor all = every_ranks_gradient(tag, 7).to(at::kDouble);
  const at::Tensor exact = all.mean(0);
  const at::Tensor mean_abs = all.abs().mean(0);
  const Averaged plain = averaged(tag + "_plain", GradCompression::None, 7);
  const Averaged compressed = averaged(tag + "_compressed", compression, 7);
  const double n = static_cast<double>(world());
  const at::Tensor bound = n * u * mean_abs * (1 + 1e-6) + n * subnormal_step + 1e-12;
  const at::Tensor error = (compressed.gradient.to(at::kDouble) - exact).abs();
  EXPECT_TRUE(error.le(bound).all().item<bool>())
      << "worst error over bound " << (error / bound).max().item<double>() << " (" << tag << ")";
  // The error is of 16-bit size, far above fp32's: the buckets did travel compressed.
  EXPECT_FALSE(at::equal(compressed.gradient, plain.gradient)) << tag;
  EXPECT_GT((compressed.gradient.to(at::kDouble) - exact).abs().max().item<double>(),
            100 * (plain.gradient.to(at::kDouble) - exact).abs().max().item<double>())
      << tag;
  EXPECT_EQ(compressed.report.last.bytes * 2, plain.report.last.bytes) << tag;
  EXPECT_EQ(plain.report.last.bytes, kGradientBytes);
  if (world() == 2) {
    // Two ranks: exactly what one 16-bit addition of the two rounded halves gives, on either transport.
    const at::ScalarType type = compression == GradCompression::Bf16 ? at::kBFloat16 : at::kHalf;
    const at::Tensor halves = all.to(at::kFloat).div(2).to(type).to(at::kFloat);
    const at::Tensor expected = (halves[0] + halves[1]).to(type).to(at::kFloat);
    EXPECT_TRUE(at::equal(compressed.gradient, expected))
        << tag << ": largest difference " << (compressed.gradient - expected).abs().max().item<double>();
  }
}

TEST(GradCompression, Bf16StaysWithinTheDocumentedErrorAndHalvesTheBytes) {
  if (!state->group("test")->allreduces_bfloat16()) GTEST_SKIP() << "Bf16IsRefusedWhereTheTransportLacksIt instead";
  expect_within_documented_error(GradCompression::Bf16, std::ldexp(1.0, -8), 0.0);
}

TEST(GradCompression, Bf16IsRefusedWhereTheTransportLacksIt) {
  if (state->group("test")->allreduces_bfloat16()) GTEST_SKIP() << "this transport carries bfloat16";
  auto model = load_mlp("refused");
  expect_error(Code::Unsupported, "use 'fp16', or keep every rank on one host",
               [&] { model->prepare(state, bucket_per_parameter(GradCompression::Bf16)); });
  EXPECT_FALSE(model->prepared());
}

TEST(GradCompression, Fp16StaysWithinTheDocumentedErrorAndHalvesTheBytes) {
  expect_within_documented_error(GradCompression::Fp16, std::ldexp(1.0, -11), std::ldexp(1.0, -25));
}

// Each element of a bucket goes into the bucket and out again on every rank, but for the one rank that reduces
// it through shared memory: that rank averages it straight from its gradient.
TEST(GradSyncStats, CopiedBytesLeaveOutEachRanksOwnShareThroughSharedMemory) {
  const Averaged plain = averaged("copied", GradCompression::None, 11);
  const at::Tensor copied = at::tensor({static_cast<double>(plain.report.last.copied_bytes)}, at::kDouble);
  const double every_rank = distributed::gather(*state, copied.unsqueeze(0)).sum().item<double>();
  const double copies_per_element = through_shared_memory() ? 2.0 * (world() - 1) : 2.0 * world();
  EXPECT_EQ(every_rank, copies_per_element * kGradientBytes);
  EXPECT_EQ(plain.report.total.copied_bytes, plain.report.last.copied_bytes);
}

// Through shared memory the ranks sum in rank order, so the average is known bit for bit: every rank's
// gradient divided by the number of processes, added up from rank 0 on (the shares reduced straight from
// the gradients included).
TEST(GradSyncStats, TheAverageIsTheRankOrderedSumOfDividedGradients) {
  if (!through_shared_memory() && world() > 2) GTEST_SKIP() << "Gloo's ring sums in an order of its own";
  const at::Tensor all = every_ranks_gradient("ordered", 13);
  const Averaged plain = averaged("ordered_plain", GradCompression::None, 13);
  at::Tensor expected = all[0] / static_cast<double>(world());
  for (int64_t r = 1; r < world(); ++r) expected = expected + all[r] / static_cast<double>(world());
  EXPECT_TRUE(at::equal(plain.gradient, expected))
      << "largest difference " << (plain.gradient - expected).abs().max().item<double>();
}

// Compression keeps training data-parallel: both ranks end with the same gradients, bit for bit.
TEST(GradCompression, EveryRankGetsTheSameGradients) {
  const Averaged compressed = averaged("same", GradCompression::Fp16, 3);
  const at::Tensor all = distributed::gather(*state, compressed.gradient.unsqueeze(0));
  for (int64_t r = 1; r < world(); ++r) EXPECT_TRUE(at::equal(all[r], all[0])) << "rank " << r;
}

}  // namespace
