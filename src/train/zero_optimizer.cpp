#include "train/zero_optimizer.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>

#include <utility>

#include "core/error.hpp"
#include "distributed/collectives.hpp"
#include "distributed/process_group.hpp"
#include "train/clipping.hpp"
#include "train/model.hpp"

namespace accel::train {

ZeroShard::ZeroShard(std::shared_ptr<distributed::State> state, ZeroPartition partition, NamedTensors parameters)
    : state_(std::move(state)), partition_(std::move(partition)), parameters_(std::move(parameters)) {
  const auto owners = partition_.owner_of(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) owner_[parameters_[i].second.unsafeGetTensorImpl()] = owners[i];
}

bool ZeroShard::owns(const at::Tensor& parameter) const {
  const auto found = owner_.find(parameter.unsafeGetTensorImpl());
  return found != owner_.end() && found->second == partition_.rank;
}

int32_t ZeroShard::owner_of(const std::string& name) const {
  for (const auto& [known, parameter] : parameters_) {
    if (known == name) return owner_.at(parameter.unsafeGetTensorImpl());
  }
  fail(Code::InvalidArgument, "ZeRO: no parameter named '" + name + "' is split");
}

bool ZeroShard::holds(const at::Tensor& parameter) const { return owner_.count(parameter.unsafeGetTensorImpl()) != 0; }

void ZeroShard::step(const std::function<void()>& step) {
  std::vector<std::pair<at::Tensor, at::Tensor>> hidden;
  for (auto& [name, parameter] : parameters_) {
    if (owns(parameter) || !parameter.grad().defined()) continue;
    hidden.emplace_back(parameter, parameter.grad());
    parameter.mutable_grad() = at::Tensor();
  }
  try {
    step();
  } catch (...) {
    for (auto& [parameter, grad] : hidden) parameter.mutable_grad() = grad;
    throw;
  }
  for (auto& [parameter, grad] : hidden) parameter.mutable_grad() = grad;
  gather_parameters();
}

// Per bucket, each rank's chunk packed with its own parameters in the split's layout and all-gathered, so
// that the gathered buffer is the bucket with every parameter in its place. Every all-gather is started
// before the first is waited for.
void ZeroShard::gather_parameters() {
  at::NoGradGuard no_grad;
  auto& transport = state_->group("ZeRO parameter all-gather")->transport();
  struct InFlight {
    at::Tensor mine, all;
    std::unique_ptr<distributed::PendingCollective> work;
  };
  std::vector<InFlight> gathers;
  const int64_t rank = partition_.rank;
  for (size_t b = 0; b < partition_.buckets.size(); ++b) {
    const ZeroBucketSplit& split = partition_.buckets[b];
    const auto& members = partition_.members[b];
    const auto options = parameters_[members.front()].second.options().requires_grad(false);
    InFlight gather{at::zeros({split.chunk}, options), at::empty({split.chunk * partition_.world}, options), nullptr};
    for (size_t m = 0; m < members.size(); ++m) {
      if (split.owners[m] != rank) continue;
      const at::Tensor& parameter = parameters_[members[m]].second;
      gather.mine.narrow(0, split.offset_in_chunk(m), parameter.numel()).copy_(parameter.reshape({-1}));
    }
    gather.work = transport.all_gather_async(gather.all, gather.mine, "ZeRO parameter all-gather");
    gathers.push_back(std::move(gather));
  }
  for (size_t b = 0; b < gathers.size(); ++b) {
    gathers[b].work->wait();
    const ZeroBucketSplit& split = partition_.buckets[b];
    const auto& members = partition_.members[b];
    for (size_t m = 0; m < members.size(); ++m) {
      if (split.owners[m] == rank) continue;
      at::Tensor& parameter = parameters_[members[m]].second;
      parameter.detach().copy_(gathers[b].all.narrow(0, split.offsets[m], parameter.numel()).view(parameter.sizes()));
    }
  }
}

bool ZeroShard::any_rank(bool found_inf) {
  if (partition_.stage < 2) return found_inf;
  auto flag = at::scalar_tensor(found_inf ? 1.0 : 0.0, at::kDouble).reshape({1});
  state_->group("ZeRO overflow check")->transport().allreduce(flag, distributed::ReduceKind::Max, "ZeRO overflow check");
  return flag.item<double>() != 0.0;
}

double ZeroShard::clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) {
  check_clip_grad_norm(parameters, max_norm, norm_type);
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!holds(parameters[i])) {
      fail(Code::Unsupported, "clip_grad_norm: parameter " + std::to_string(i) +
                                  " is not one of the zero_stage 2 model's, whose gradients are split between the "
                                  "ranks; clip the model's parameters apart from others");
    }
  }
  at::NoGradGuard no_grad;
  // Per parameter: its norm (as a double, which holds a float norm exactly), then whether it has one (a
  // defined, non-empty gradient, as clip_grad_norm counts them); only the owner writes either.
  const auto count = static_cast<int64_t>(parameters.size());
  auto shared = at::zeros({2 * count}, at::kDouble);
  auto* values = shared.data_ptr<double>();
  std::vector<at::Tensor> own_grads;
  for (int64_t i = 0; i < count; ++i) {
    const at::Tensor& parameter = parameters[static_cast<size_t>(i)];
    if (!owns(parameter)) continue;
    const at::Tensor grad = parameter.grad();
    if (!grad.defined()) continue;
    own_grads.push_back(grad);
    if (grad.numel() == 0) continue;
    values[i] = grad_norm(grad, norm_type).item<double>();
    values[count + i] = 1.0;
  }
  state_->group("ZeRO gradient norm")->transport().allreduce(shared, distributed::ReduceKind::Sum, "ZeRO gradient norm");
  std::vector<at::Tensor> norms;
  for (int64_t i = 0; i < count; ++i) {
    if (values[count + i] == 0.0) continue;
    const at::Tensor& parameter = parameters[static_cast<size_t>(i)];
    norms.push_back(at::scalar_tensor(values[i], parameter.options().requires_grad(false)));
  }
  if (norms.empty()) return 0.0;
  return scale_by_total_norm(norms, own_grads, max_norm, norm_type).item<double>();
}

std::vector<std::string> ZeroShard::gather_bytes(const std::string& bytes) {
  return distributed::gather_bytes(*state_, bytes);
}

}  // namespace accel::train

namespace accel::train {

void shard_for_zero(const Model& model, Optimizer& optimizer) {
  const ZeroPartition* partition = model.zero_partition();
  if (partition == nullptr) return;
  optimizer.attach_zero(std::make_shared<ZeroShard>(model.state(), *partition, model.trainable_parameters()));
}

}  // namespace accel::train
