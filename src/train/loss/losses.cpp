#include "train/loss/losses.hpp"

#include <ATen/core/Reduction.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/binary_cross_entropy_with_logits.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/l1_loss.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/nll_loss.h>

#include <sstream>

#include "core/error.hpp"
#include "core/options.hpp"
#include "core/value_ranges.hpp"

namespace accel::train {
namespace {

std::string shape_of(const at::Tensor& tensor) {
  std::ostringstream out;
  out << tensor.sizes();
  return out.str();
}

int64_t reduction_of(const std::string& reduction) {
  if (reduction == "mean") return at::Reduction::Mean;
  if (reduction == "sum") return at::Reduction::Sum;
  if (reduction == "none") return at::Reduction::None;
  fail(Code::InvalidArgument, "unknown loss reduction '" + reduction + "' (known: mean, sum, none)");
}

void require_floating(const std::string& name, const char* what, const at::Tensor& tensor) {
  if (!at::isFloatingType(tensor.scalar_type())) {
    fail(Code::Dtype, name + " " + what + " must be a floating tensor, got " + c10::toString(tensor.scalar_type()));
  }
}

// cross_entropy and nll: [N, C] scores against int64 [N] class indices, each in [0, C) or ignore_index.
void check_class_targets(const std::string& name, const at::Tensor& input, const at::Tensor& target,
                         const LossConfig& config) {
  require_floating(name, "input", input);
  if (input.dim() != 2) fail(Code::ShapeMismatch, name + " input must be [N, C], got " + shape_of(input));
  if (target.scalar_type() != at::kLong) {
    fail(Code::Dtype, name + " target must be int64 class indices of shape [N], got " +
                          c10::toString(target.scalar_type()) +
                          (at::isFloatingType(target.scalar_type()) ? " (class probabilities are not supported)" : ""));
  }
  if (target.dim() != 1 || target.size(0) != input.size(0)) {
    fail(Code::ShapeMismatch, name + " target shape " + shape_of(target) + " does not match input shape " +
                                  shape_of(input) + " (expected [" + std::to_string(input.size(0)) + "])");
  }
  const int64_t classes = input.size(1);
  auto out_of_range = [&](int64_t row, int64_t value) {
    fail(Code::InvalidArgument, name + " target " + std::to_string(value) + " at row " + std::to_string(row) +
                                    " is outside [0, " + std::to_string(classes) + ") and is not ignore_index " +
                                    std::to_string(config.ignore_index));
  };
  if (target.is_cpu()) {
    // A plain scan: on the CPU it costs a fraction of the tensor ops below, and this runs every step.
    const auto contiguous = target.contiguous();
    const auto* values = contiguous.data_ptr<int64_t>();
    for (int64_t row = 0; row < contiguous.numel(); ++row) {
      const int64_t value = values[row];
      if ((value < 0 || value >= classes) && value != config.ignore_index) out_of_range(row, value);
    }
    return;
  }
  if (target.numel() == 0) return;
  // Elsewhere (a GPU) an out-of-range class would end in a device-side assert that ruins the CUDA context.
  // Targets that accel copied from the host have a recorded range: no kernel, no read-back. Others cost
  // one reduction and one read (a synchronisation); the full scan runs only when some target is no class.
  if (const auto range = known_value_range(target)) {
    if (range->within(0, classes - 1, config.ignore_index)) return;
  } else {
    const auto [low, high] = at::aminmax(target);
    const auto bounds = at::stack({low, high}).cpu();
    const auto* bound = bounds.data_ptr<int64_t>();
    if (bound[0] >= 0 && bound[1] < classes) return;
  }
  const auto bad = target.lt(0).logical_or(target.ge(classes)).logical_and(target.ne(config.ignore_index));
  if (bad.any().item<bool>()) {
    const auto row = bad.nonzero()[0][0].item<int64_t>();
    out_of_range(row, target[row].item<int64_t>());
  }
}

// mse, l1, bce_with_logits: an elementwise target. torch would broadcast a different shape (with a
// warning) and fail later in backward on a different dtype; both are refused here.
void check_elementwise_target(const std::string& name, const at::Tensor& input, const at::Tensor& target,
                              const LossConfig&) {
  require_floating(name, "input", input);
  require_floating(name, "target", target);
  if (target.scalar_type() != input.scalar_type()) {
    fail(Code::Dtype, name + " target dtype " + c10::toString(target.scalar_type()) + " must match input dtype " +
                          c10::toString(input.scalar_type()));
  }
  if (target.sizes() != input.sizes()) {
    fail(Code::ShapeMismatch,
         name + " target shape " + shape_of(target) + " does not match input shape " + shape_of(input));
  }
}

struct LossKind {
  const char* name;
  void (*check)(const std::string&, const at::Tensor&, const at::Tensor&, const LossConfig&);
  at::Tensor (*compute)(const at::Tensor&, const at::Tensor&, int64_t reduction, const LossConfig&);
};

const LossKind kLosses[] = {
    {"cross_entropy", &check_class_targets,
     [](const at::Tensor& input, const at::Tensor& target, int64_t reduction, const LossConfig& config) {
       return at::cross_entropy_loss(input, target, c10::nullopt, reduction, config.ignore_index,
                                     config.label_smoothing);
     }},
    {"nll", &check_class_targets,
     [](const at::Tensor& input, const at::Tensor& target, int64_t reduction, const LossConfig& config) {
       return at::nll_loss(input, target, c10::nullopt, reduction, config.ignore_index);
     }},
    {"mse", &check_elementwise_target,
     [](const at::Tensor& input, const at::Tensor& target, int64_t reduction, const LossConfig&) {
       return at::mse_loss(input, target, reduction);
     }},
    {"l1", &check_elementwise_target,
     [](const at::Tensor& input, const at::Tensor& target, int64_t reduction, const LossConfig&) {
       return at::l1_loss(input, target, reduction);
     }},
    {"bce_with_logits", &check_elementwise_target,
     [](const at::Tensor& input, const at::Tensor& target, int64_t reduction, const LossConfig&) {
       return at::binary_cross_entropy_with_logits(input, target, c10::nullopt, c10::nullopt, reduction);
     }},
};

const LossKind& loss_for(const std::string& name) {
  std::string known;
  for (const auto& loss : kLosses) {
    if (name == loss.name) return loss;
    known += std::string(known.empty() ? "" : ", ") + loss.name;
  }
  fail(Code::InvalidArgument, "unknown loss '" + name + "' (known: " + known + ")");
}

void check_common(const std::string& name, const at::Tensor& input, const at::Tensor& target) {
  if (!input.defined()) fail(Code::InvalidArgument, name + " input is an undefined tensor");
  if (!target.defined()) fail(Code::InvalidArgument, name + " target is an undefined tensor");
  if (input.device() != target.device()) {
    fail(Code::InvalidArgument,
         name + " input is on " + input.device().str() + " but target is on " + target.device().str());
  }
}

}  // namespace

void check_loss_settings(const std::string& name, const LossConfig& config) {
  loss_for(name);
  reduction_of(config.reduction);
  // A shared config must not silently drop a setting the loss has no use for.
  if (name != "cross_entropy" && config.label_smoothing != 0) {
    fail(Code::InvalidArgument, "label_smoothing applies to cross_entropy only, not to " + name);
  }
  if (!(config.label_smoothing >= 0 && config.label_smoothing <= 1)) {
    fail(Code::InvalidArgument, name + " label_smoothing must be in [0, 1], got " + format_number(config.label_smoothing));
  }
}

void check_loss(const std::string& name, const at::Tensor& input, const at::Tensor& target, const LossConfig& config) {
  check_loss_settings(name, config);
  check_common(name, input, target);
  loss_for(name).check(name, input, target, config);
}

at::Tensor compute_loss(const std::string& name, const at::Tensor& input, const at::Tensor& target,
                        const LossConfig& config) {
  check_loss(name, input, target, config);
  const auto& loss = loss_for(name);
  const int64_t reduction = reduction_of(config.reduction);
  try {
    return loss.compute(input, target, reduction, config);
  } catch (const c10::Error& error) {
    fail_from(error, Code::Torch, name + " loss failed: ");
  }
}

}  // namespace accel::train
