#include "train/optim/zero_optimizer.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <deque>
#include <utility>

#include "core/error.hpp"
#include "distributed/collectives/collectives.hpp"
#include "distributed/group/process_group.hpp"
#include "train/model/model.hpp"
#include "train/optim/clipping.hpp"
#include "train/optim/optimizer.hpp"

namespace accel::train {

namespace {
// The parameter all-gathers in flight at once: enough to overlap one bucket's copying out with the next
// one's transfer, few enough that the gathered buckets never add up to a second copy of the model.
constexpr size_t kGathersInFlight = 2;

// Where an offloaded piece of `parameter` lives: host memory, pinned for a GPU's parameter so that the copies
// to and from it are DMA, not staged through pageable memory.
at::TensorOptions host_options(const at::Tensor& parameter) {
  return parameter.options().device(at::kCPU).pinned_memory(parameter.is_cuda()).requires_grad(false);
}

// The piece's elements in its parameter's memory (stages 1 and 2).
at::Tensor in_parameter(const at::Tensor& parameter, const ZeroPiece& piece) {
  return parameter.detach().view({-1}).narrow(0, piece.begin, piece.numel);
}
}  // namespace

ZeroShard::ZeroShard(std::shared_ptr<distributed::State> state, ZeroPartition partition, NamedTensors parameters)
    : state_(std::move(state)), partition_(std::move(partition)), parameters_(std::move(parameters)),
      pieces_(partition_.pieces_of(partition_.rank)), pieces_by_parameter_(parameters_.size()),
      places_(parameters_.size()) {
  at::NoGradGuard no_grad;
  for (size_t b = 0; b < partition_.members.size(); ++b) {
    for (size_t m = 0; m < partition_.members[b].size(); ++m) places_[partition_.members[b][m]] = {b, m};
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const at::Tensor& parameter = parameters_[i].second;
    index_[parameter.unsafeGetTensorImpl()] = i;
    if (partition_.stage < 3 && !parameter.is_contiguous()) {
      fail(Code::Unsupported, "zero_stage " + std::to_string(partition_.stage) + ": parameter '" + parameters_[i].first +
                                  "' is not contiguous, and ZeRO steps views of its memory; make it contiguous");
    }
  }
  if (partition_.held_pieces->size() != pieces_.size()) {
    fail(Code::Internal, "ZeRO: the reducer holds " + std::to_string(partition_.held_pieces->size()) +
                             " gradient pieces for this rank's " + std::to_string(pieces_.size()));
  }
  host_pieces_ = partition_.stage < 3 && partition_.host_pieces;
  for (size_t k = 0; k < pieces_.size(); ++k) {
    const ZeroPiece& piece = pieces_[k];
    const at::Tensor& parameter = parameters_[piece.parameter].second;
    // Stage 3: the parameters' values live in this rank's chunks only (train/ddp/sharded_units.hpp).
    at::Tensor view = partition_.stage == 3
                          ? partition_.parameter_chunks[piece.bucket].narrow(0, piece.in_chunk, piece.numel)
                          : in_parameter(parameter, piece);
    if (host_pieces_) view = at::empty({piece.numel}, host_options(parameter)).copy_(view);
    views_.push_back(view);
    pieces_by_parameter_[piece.parameter].push_back(k);
  }
  host_gradients_.resize(host_pieces_ ? pieces_.size() : 0);
}

bool ZeroShard::holds(const at::Tensor& parameter) const { return index_.count(parameter.unsafeGetTensorImpl()) != 0; }

size_t ZeroShard::index_of(const at::Tensor& parameter) const {
  const auto found = index_.find(parameter.unsafeGetTensorImpl());
  require_argument(found != index_.end(), "ZeRO: the tensor is not one of the split model's parameters");
  return found->second;
}

std::vector<at::Tensor> ZeroShard::pieces_of(const at::Tensor& parameter) const {
  std::vector<at::Tensor> pieces;
  const auto found = index_.find(parameter.unsafeGetTensorImpl());
  if (found == index_.end()) return pieces;
  for (size_t k : pieces_by_parameter_[found->second]) pieces.push_back(views_[k]);
  return pieces;
}

std::vector<at::Tensor> ZeroShard::gradient_pieces(const std::vector<at::Tensor>& parameters) {
  const auto& held = *partition_.held_pieces;
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& given : parameters) {
    const size_t index = index_of(given);
    at::Tensor& parameter = parameters_[index].second;
    // A view of a non-contiguous gradient would be a copy, which unscaling or clipping would change in vain.
    if (parameter.grad().defined() && !parameter.grad().is_contiguous()) parameter.mutable_grad() = parameter.grad().contiguous();
    const at::Tensor grad = parameter.grad();
    for (size_t k : pieces_by_parameter_[index]) {
      const ZeroPiece& piece = pieces_[k];
      views_[k].mutable_grad() = grad.defined() ? grad.view({-1}).narrow(0, piece.begin, piece.numel) : held[k];
      pieces.push_back(views_[k]);
    }
  }
  return pieces;
}

void ZeroShard::copy_to_host_pieces() {
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < pieces_.size(); ++k) {
    const ZeroPiece& piece = pieces_[k];
    const at::Tensor& parameter = parameters_[piece.parameter].second;
    views_[k].copy_(in_parameter(parameter, piece));
    const at::Tensor grad = views_[k].grad();
    if (!grad.defined()) continue;
    if (!host_gradients_[k].defined()) host_gradients_[k] = at::empty({piece.numel}, host_options(parameter));
    views_[k].mutable_grad() = host_gradients_[k].copy_(grad);
  }
}

void ZeroShard::step(const std::function<void()>& step) {
  std::vector<at::Tensor> all;
  for (const auto& parameter : parameters_) all.push_back(parameter.second);
  gradient_pieces(all);
  // Offloaded, the pieces are copies: taken afresh from the parameters, which a load may have replaced since.
  if (host_pieces_) copy_to_host_pieces();
  step();
  // Stage 3 gathers a unit's parameters when the caller next uses them.
  if (partition_.stage < 3) gather_parameters();
}

void ZeroShard::forget_gradients(bool set_to_none) {
  for (auto& view : views_) {
    if (view.grad().defined() && !set_to_none) view.mutable_grad().zero_();
    view.mutable_grad() = at::Tensor();
  }
  for (auto& held : *partition_.held_pieces) {
    if (!held.defined()) continue;
    if (set_to_none) {
      held = at::Tensor();
    } else {
      held.zero_();
    }
  }
}

// Per bucket, this rank's chunk packed with its pieces and all-gathered, so that the gathered buffer is the
// bucket's layout with every element in its place; kGathersInFlight at a time.
void ZeroShard::gather_parameters() {
  at::NoGradGuard no_grad;
  if (partition_.world == 1) {  // ZeRO-Offload on one process: its host pieces are every element
    for (size_t k = 0; k < pieces_.size(); ++k) {
      in_parameter(parameters_[pieces_[k].parameter].second, pieces_[k]).copy_(views_[k]);
    }
    return;
  }
  auto& transport = shard_group(*state_, partition_, "ZeRO parameter all-gather").transport();
  struct InFlight {
    size_t bucket;
    at::Tensor mine, all;
    std::unique_ptr<distributed::PendingCollective> work;
  };
  const int64_t rank = partition_.rank;
  const auto start = [&](size_t b) {
    const ZeroBucketSplit& split = partition_.buckets[b];
    const auto options = parameters_[partition_.members[b].front()].second.options().requires_grad(false);
    InFlight gather{b, at::zeros({split.chunk}, options), at::empty({split.chunk * partition_.world}, options), nullptr};
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (pieces_[k].bucket == b) gather.mine.narrow(0, pieces_[k].in_chunk, pieces_[k].numel).copy_(views_[k]);
    }
    gather.work = transport.all_gather_async(gather.all, gather.mine, "ZeRO parameter all-gather");
    return gather;
  };
  std::deque<InFlight> gathers;
  size_t next = 0;
  while (next < partition_.buckets.size() || !gathers.empty()) {
    while (next < partition_.buckets.size() && gathers.size() < kGathersInFlight) gathers.push_back(start(next++));
    InFlight& done = gathers.front();
    done.work->wait();
    const ZeroBucketSplit& split = partition_.buckets[done.bucket];
    const auto& members = partition_.members[done.bucket];
    for (size_t m = 0; m < members.size(); ++m) {
      at::Tensor flat = parameters_[members[m]].second.detach().view({-1});
      for (int64_t r = 0; r < partition_.world; ++r) {
        // This rank's elements are the parameters' own memory, stepped in place, unless they were host copies.
        if (r == rank && !host_pieces_) continue;
        const auto [begin, end] = split.part(m, r);
        if (begin < end) flat.narrow(0, begin, end - begin).copy_(done.all.narrow(0, split.offsets[m] + begin, end - begin));
      }
    }
    gathers.pop_front();
  }
}

bool ZeroShard::any_rank(bool found_inf) {
  if (partition_.stage < 2 || state_->launch().world_size == 1) return found_inf;
  auto flag = at::scalar_tensor(found_inf ? 1.0 : 0.0, at::kDouble).reshape({1});
  state_->group("ZeRO overflow check")->transport().allreduce(flag, distributed::ReduceKind::Max, "ZeRO overflow check");
  return flag.item<double>() != 0.0;
}

// The whole gradients of parameters owned in pieces (partition indices), assembled on every rank from every
// rank's pieces by one all-gather: rank r sends its pieces of them one after another, padded to the longest
// rank's share. A rank without a gradient for its piece sends zeros.
std::vector<at::Tensor> ZeroShard::gathered_split_gradients(const std::vector<size_t>& split) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> parts(split.size());  // per parameter, per rank
  std::vector<int64_t> sent(static_cast<size_t>(partition_.world), 0);
  for (size_t j = 0; j < split.size(); ++j) {
    const auto [bucket, member] = places_[split[j]];
    for (int64_t r = 0; r < partition_.world; ++r) {
      parts[j].push_back(partition_.buckets[bucket].part(member, r));
      sent[static_cast<size_t>(r)] += parts[j].back().second - parts[j].back().first;
    }
  }
  const int64_t longest = *std::max_element(sent.begin(), sent.end());
  const auto options = parameters_[split.front()].second.options().requires_grad(false);
  auto mine = at::zeros({longest}, options);
  int64_t at_offset = 0;
  for (size_t j = 0; j < split.size(); ++j) {
    for (size_t k : pieces_by_parameter_[split[j]]) {
      if (views_[k].grad().defined()) mine.narrow(0, at_offset, pieces_[k].numel).copy_(views_[k].grad());
      at_offset += pieces_[k].numel;
    }
  }
  auto all = at::empty({longest * partition_.world}, options);
  shard_group(*state_, partition_, "ZeRO gradient norm").transport().all_gather(all, mine, "ZeRO gradient norm");
  std::vector<at::Tensor> whole;
  std::vector<int64_t> read(static_cast<size_t>(partition_.world), 0);
  for (size_t j = 0; j < split.size(); ++j) {
    const at::Tensor& parameter = parameters_[split[j]].second;
    auto full = at::empty({parameter.numel()}, options);
    for (int64_t r = 0; r < partition_.world; ++r) {
      const auto [begin, end] = parts[j][r];
      if (begin == end) continue;
      full.narrow(0, begin, end - begin).copy_(all.narrow(0, r * longest + read[r], end - begin));
      read[r] += end - begin;
    }
    whole.push_back(full.view(parameter.sizes()));
  }
  return whole;
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
  const auto pieces = gradient_pieces(parameters);
  // Per parameter: its norm (as a double, which holds a float norm exactly), then whether it has one (a
  // defined, non-empty gradient, as clip_grad_norm counts them). A parameter one rank owns whole: only that
  // rank writes either. One owned in pieces: every rank with a gradient for its piece adds to the second.
  const auto count = static_cast<int64_t>(parameters.size());
  auto shared = at::zeros({2 * count}, at::kDouble);
  auto* values = shared.data_ptr<double>();
  std::vector<size_t> split, split_positions;
  for (int64_t i = 0; i < count; ++i) {
    const size_t index = index_of(parameters[static_cast<size_t>(i)]);
    const int32_t owner = partition_.buckets[places_[index].first].whole_owner(places_[index].second);
    if (pieces_by_parameter_[index].empty() && owner != -1) continue;
    if (owner == -1) {
      split.push_back(index);
      split_positions.push_back(static_cast<size_t>(i));
      if (!pieces_by_parameter_[index].empty() && views_[pieces_by_parameter_[index].front()].grad().defined()) {
        values[count + i] = 1.0;
      }
      continue;
    }
    const at::Tensor grad = views_[pieces_by_parameter_[index].front()].grad();
    if (!grad.defined()) continue;
    values[i] = grad_norm(grad.view(parameters_[index].second.sizes()), norm_type).item<double>();
    values[count + i] = 1.0;
  }
  if (!split.empty()) {
    const auto whole = gathered_split_gradients(split);
    for (size_t j = 0; j < split.size(); ++j) values[split_positions[j]] = grad_norm(whole[j], norm_type).item<double>();
  }
  // Every rank measured the split ones alike: their norms are summed once, from rank 0. Under hybrid sharding
  // every node holds the same gradients: the node's ranks sum them.
  if (partition_.rank != 0) {
    for (size_t position : split_positions) values[position] = 0.0;
  }
  if (state_->launch().world_size > 1) {  // stage 3 on one process (offloaded) holds every norm itself
    shard_group(*state_, partition_, "ZeRO gradient norm")
        .transport()
        .allreduce(shared, distributed::ReduceKind::Sum, "ZeRO gradient norm");
  }
  std::vector<at::Tensor> norms;
  for (int64_t i = 0; i < count; ++i) {
    if (values[count + i] == 0.0) continue;
    norms.push_back(at::scalar_tensor(values[i], parameters[static_cast<size_t>(i)].options().requires_grad(false)));
  }
  if (norms.empty()) return 0.0;
  std::vector<at::Tensor> grads;
  for (const auto& piece : pieces) {
    if (piece.grad().defined()) grads.push_back(piece.grad());
  }
  return scale_by_total_norm(norms, grads, max_norm, norm_type).item<double>();
}

std::vector<std::string> ZeroShard::gather_bytes(const std::string& bytes) {
  return distributed::gather_bytes(*state_, bytes);
}

std::vector<std::vector<std::string>> ZeroShard::split_by_rank() const {
  std::vector<std::vector<std::string>> split(static_cast<size_t>(partition_.world));
  for (int32_t r = 0; r < partition_.world; ++r) {
    for (const ZeroPiece& piece : partition_.pieces_of(r)) {
      const std::string& name = parameters_[piece.parameter].first;
      split[static_cast<size_t>(r)].push_back(
          piece.whole ? name
                      : name + "[" + std::to_string(piece.begin) + ":" + std::to_string(piece.begin + piece.numel) + "]");
    }
  }
  return split;
}

void shard_for_zero(const Model& model, Optimizer& optimizer) {
  const ZeroPartition* partition = model.zero_partition();
  if (partition == nullptr) return;
  optimizer.attach_zero(std::make_shared<ZeroShard>(model.state(), *partition, model.trainable_parameters()));
}

}  // namespace accel::train
