#include "train/optim/capturable_optimizer.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/div.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "train/optim/optimizer_state_key.hpp"

namespace accel::train {
namespace {

// x, or zeros where skip holds (a direction that must move nothing on a skipped step, inf or NaN as it may be).
at::Tensor unless_skipped(const at::Tensor& x, const at::Tensor& skip) {
  return skip.defined() ? x.masked_fill(skip, 0) : x;
}

// tensor *= factor, or *= 1 where skip holds. A 0-dim float32 factor rounds as the host scalar does.
at::Tensor& scale_unless_skipped(at::Tensor& tensor, double factor, const at::Tensor& skip) {
  if (!skip.defined()) return tensor.mul_(factor);
  return tensor.mul_(at::where(skip, 1.0, factor).to(at::kFloat));
}

template <typename Options>
std::pair<double, double> betas_of(const Options& options) {
  return {std::get<0>(options.betas()), std::get<1>(options.betas())};
}

}  // namespace

struct CapturableOptimizer::Impl {
  torch::optim::Optimizer& optimizer;
  std::string kind;
  at::Tensor lrs;  // float64 [groups], on the parameters' device
  std::vector<double> pushed_lrs;  // what lrs holds
  std::vector<at::Tensor> step_counts;  // adam, adamw: float64 [parameters of the group]
  bool counts_stale = true;  // the host's counts are newer than step_counts
  bool device_ahead = false;  // step_counts are newer than the host's

  bool adam_family() const { return kind != "sgd"; }

  torch::optim::OptimizerParamState* state_of(const at::Tensor& parameter) const {
    const auto found = optimizer.state().find(optimizer_state_key(optimizer.state(), parameter));
    return found == optimizer.state().end() ? nullptr : found->second.get();
  }

  // Host step counts into step_counts, in place (a captured step keeps reading the same memory).
  void read_counts() {
    auto& groups = optimizer.param_groups();
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<double> counts;
      for (const auto& parameter : groups[g].params()) {
        const auto* state = state_of(parameter);
        counts.push_back(state == nullptr ? 0.0 : static_cast<double>(step_of(*state)));
      }
      const auto host = at::tensor(counts, at::TensorOptions().dtype(at::kDouble));
      if (step_counts.size() <= g) {
        step_counts.push_back(host.to(lrs.device()));
      } else {
        step_counts[g].copy_(host);
      }
    }
    counts_stale = false;
  }

  int64_t step_of(const torch::optim::OptimizerParamState& state) const {
    return kind == "adam" ? static_cast<const torch::optim::AdamParamState&>(state).step()
                          : static_cast<const torch::optim::AdamWParamState&>(state).step();
  }

  void sgd_step(size_t g, const at::Tensor& neg_lr, const at::Tensor& skip) {
    auto& group = optimizer.param_groups()[g];
    const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
    for (auto& parameter : group.params()) {
      if (!parameter.grad().defined()) continue;
      auto direction = parameter.grad();
      if (options.weight_decay() != 0) direction = direction.add(parameter, options.weight_decay());
      if (options.momentum() != 0) {
        at::Tensor buffer;
        if (auto* state = state_of(parameter)) {
          buffer = static_cast<torch::optim::SGDParamState&>(*state).momentum_buffer();
          scale_unless_skipped(buffer, options.momentum(), skip)
              .add_(unless_skipped(direction, skip), 1 - options.dampening());
        } else {
          buffer = direction.clone().detach();
          auto made = std::make_unique<torch::optim::SGDParamState>();
          made->momentum_buffer(buffer);
          optimizer.state()[optimizer_state_key(optimizer.state(), parameter)] = std::move(made);
        }
        direction = options.nesterov() ? direction.add(buffer, options.momentum()) : buffer;
      }
      parameter.addcmul_(unless_skipped(direction, skip), neg_lr);
    }
  }

  template <typename Options, typename ParamState, bool kDecoupled>
  void adam_step(size_t g, const at::Tensor& skip) {
    auto& group = optimizer.param_groups()[g];
    const auto& options = static_cast<const Options&>(group.options());
    const auto [beta1, beta2] = betas_of(options);
    const double weight_decay = options.weight_decay();
    auto& params = group.params();
    std::vector<size_t> stepped;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].grad().defined()) stepped.push_back(i);
    }
    if (stepped.empty()) return;
    auto& counts = step_counts[g];
    const at::Tensor increment = skip.defined() ? skip.logical_not().to(at::kDouble) : at::ones({}, counts.options());
    if (stepped.size() == params.size()) {
      counts.add_(increment);
    } else {
      for (const size_t i : stepped) counts.select(0, static_cast<int64_t>(i)).add_(increment);
    }
    // torch::optim computes these on the host in double; here they are computed on the device, also in double.
    const auto lr = lrs.select(0, static_cast<int64_t>(g));
    const auto bias_correction1 = at::rsub(at::pow(beta1, counts), 1);
    const auto bias_correction2 = at::rsub(at::pow(beta2, counts), 1);
    // A host double divisor is a float to the kernel; CUDA multiplies by its reciprocal instead of dividing.
    const auto root = bias_correction2.sqrt().to(at::kFloat);
    const bool reciprocal = counts.is_cuda();
    const auto root_factor = reciprocal ? root.reciprocal() : root;
    const auto neg_step = unless_skipped(at::div(lr, bias_correction1).neg().to(at::kFloat), skip);
    at::Tensor decay_factor;
    if (kDecoupled && weight_decay != 0) {
      decay_factor = at::rsub(lr.mul(weight_decay), 1).to(at::kFloat);
      if (skip.defined()) decay_factor = decay_factor.masked_fill(skip, 1);
    }
    for (const size_t i : stepped) {
      auto& parameter = params[i];
      auto* state = state_of(parameter);
      if (state == nullptr) {
        auto made = std::make_unique<ParamState>();
        made->step(0);
        made->exp_avg(at::zeros_like(parameter, at::MemoryFormat::Preserve));
        made->exp_avg_sq(at::zeros_like(parameter, at::MemoryFormat::Preserve));
        state = made.get();
        optimizer.state()[optimizer_state_key(optimizer.state(), parameter)] = std::move(made);
      }
      auto& typed = static_cast<ParamState&>(*state);
      auto grad = parameter.grad();
      if (!kDecoupled && weight_decay != 0) grad = grad.add(parameter, weight_decay);
      if (decay_factor.defined()) parameter.mul_(decay_factor);
      grad = unless_skipped(grad, skip);
      auto exp_avg = typed.exp_avg();
      auto exp_avg_sq = typed.exp_avg_sq();
      scale_unless_skipped(exp_avg, beta1, skip).add_(grad, 1 - beta1);
      scale_unless_skipped(exp_avg_sq, beta2, skip).addcmul_(grad, grad, 1 - beta2);
      const auto index = static_cast<int64_t>(i);
      auto denominator = exp_avg_sq.sqrt();
      if (reciprocal) {
        denominator.mul_(root_factor.select(0, index));
      } else {
        denominator.div_(root_factor.select(0, index));
      }
      denominator.add_(options.eps());
      parameter.addcmul_(exp_avg.div(denominator), neg_step.select(0, index));
    }
  }
};

CapturableOptimizer::CapturableOptimizer(torch::optim::Optimizer& optimizer, std::string kind)
    : impl_(new Impl{optimizer, std::move(kind), {}, {}, {}, true, false}) {
  auto& groups = optimizer.param_groups();
  if (groups.empty() || groups.front().params().empty()) fail(Code::InvalidArgument, "the optimizer has no parameters");
  const auto device = groups.front().params().front().device();
  impl_->lrs = at::zeros({static_cast<int64_t>(groups.size())}, at::TensorOptions().dtype(at::kDouble).device(device));
  impl_->pushed_lrs.assign(groups.size(), std::numeric_limits<double>::quiet_NaN());
}

CapturableOptimizer::~CapturableOptimizer() = default;

void CapturableOptimizer::refresh() {
  if (impl_->adam_family() && impl_->counts_stale) impl_->read_counts();
  auto& groups = impl_->optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const double lr = groups[g].options().get_lr();
    if (lr == impl_->pushed_lrs[g]) continue;
    impl_->lrs.select(0, static_cast<int64_t>(g)).fill_(lr);
    impl_->pushed_lrs[g] = lr;
  }
}

std::vector<double> CapturableOptimizer::constants() const {
  std::vector<double> values;
  for (const auto& group : impl_->optimizer.param_groups()) {
    if (impl_->kind == "sgd") {
      const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
      values.insert(values.end(), {o.momentum(), o.dampening(), o.nesterov() ? 1.0 : 0.0, o.weight_decay()});
    } else if (impl_->kind == "adam") {
      const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
      const auto [beta1, beta2] = betas_of(o);
      values.insert(values.end(), {beta1, beta2, o.eps(), o.weight_decay()});
    } else {
      const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
      const auto [beta1, beta2] = betas_of(o);
      values.insert(values.end(), {beta1, beta2, o.eps(), o.weight_decay()});
    }
  }
  return values;
}

void CapturableOptimizer::step(const at::Tensor& skip, bool capturing) {
  at::NoGradGuard no_grad;
  auto& impl = *impl_;
  if (impl.adam_family() && impl.counts_stale) {
    if (capturing) throw OptimizerStateNotReady("the optimizer's step counts changed on the host since the last step");
    impl.read_counts();
  }
  bool missing_state = false;
  for (const auto& group : impl.optimizer.param_groups()) {
    for (const auto& parameter : group.params()) {
      // SGD without momentum keeps no state.
      const bool keeps_state = impl.adam_family() ||
                               static_cast<const torch::optim::SGDOptions&>(group.options()).momentum() != 0;
      if (keeps_state && parameter.grad().defined() && impl.state_of(parameter) == nullptr) missing_state = true;
    }
  }
  at::Tensor effective_skip = skip;
  if (missing_state) {
    if (capturing) throw OptimizerStateNotReady("a parameter with a gradient has no optimizer state yet");
    // torch::optim makes a parameter's state at its first step, and a skipped step is no step.
    if (skip.defined() && skip.item<bool>()) return;
    effective_skip = at::Tensor();
  }
  const auto neg_lrs = impl.lrs.neg().to(at::kFloat);
  for (size_t g = 0; g < impl.optimizer.param_groups().size(); ++g) {
    if (impl.kind == "sgd") {
      impl.sgd_step(g, neg_lrs.select(0, static_cast<int64_t>(g)), effective_skip);
    } else if (impl.kind == "adam") {
      impl.adam_step<torch::optim::AdamOptions, torch::optim::AdamParamState, false>(g, effective_skip);
    } else {
      impl.adam_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState, true>(g, effective_skip);
    }
  }
  if (impl.adam_family()) impl.device_ahead = true;
}

void CapturableOptimizer::write_back() {
  auto& impl = *impl_;
  if (!impl.device_ahead) return;
  auto& groups = impl.optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto counts = impl.step_counts[g].cpu();
    const auto* values = counts.data_ptr<double>();
    const auto& params = groups[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      auto* state = impl.state_of(params[i]);
      if (state == nullptr) continue;
      const auto count = static_cast<int64_t>(values[i]);
      if (impl.kind == "adam") {
        static_cast<torch::optim::AdamParamState&>(*state).step(count);
      } else {
        static_cast<torch::optim::AdamWParamState&>(*state).step(count);
      }
    }
  }
  impl.device_ahead = false;
}

void CapturableOptimizer::invalidate() {
  impl_->counts_stale = true;
  impl_->device_ahead = false;
}

}  // namespace accel::train
