#include "train/optim/zero_state.hpp"

#include <ATen/ops/empty.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <memory>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "train/optim/archive.hpp"
#include "train/optim/optimizer_state_key.hpp"
#include "train/optim/zero_optimizer.hpp"

namespace accel::train {
namespace {

using ParamState = torch::optim::OptimizerParamState;

std::unique_ptr<ParamState> new_state(const std::string& kind) {
  if (kind == "sgd") return std::make_unique<torch::optim::SGDParamState>();
  if (kind == "adam") return std::make_unique<torch::optim::AdamParamState>();
  if (kind == "adamw") return std::make_unique<torch::optim::AdamWParamState>();
  fail(Code::Internal, "ZeRO: no piece state for optimizer kind '" + kind + "'");
}

// A parameter's state tensors, each the parameter's shape or a piece's (undefined ones included, so that two
// states of one kind give their slots in the same order); the step counts are per element the same.
std::vector<at::Tensor*> slots_of(ParamState& state) {
  if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(&state)) return {&sgd->momentum_buffer()};
  if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(&state)) {
    return {&adam->exp_avg(), &adam->exp_avg_sq(), &adam->max_exp_avg_sq()};
  }
  if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(&state)) {
    return {&adamw->exp_avg(), &adamw->exp_avg_sq(), &adamw->max_exp_avg_sq()};
  }
  fail(Code::Internal, "ZeRO: an optimizer state of an unknown kind");
}

std::string piece_key(const ZeroPiece& piece) {
  return "piece_" + std::to_string(piece.parameter) + "_" + std::to_string(piece.begin);
}

}  // namespace

void gather_piece_states(ZeroShard& shard, const torch::optim::Optimizer& pieces, torch::optim::Optimizer& whole,
                         const std::string& kind) {
  const auto& own = pieces.state();
  torch::serialize::OutputArchive archive;
  for (size_t k = 0; k < shard.pieces().size(); ++k) {
    const auto found = own.find(optimizer_state_key(own, shard.views()[k]));
    if (found == own.end()) continue;
    torch::serialize::OutputArchive piece;
    found->second->serialize(piece);
    archive.write(piece_key(shard.pieces()[k]), piece);
  }
  const auto parts = shard.gather_bytes(archive_bytes(archive));
  // Per parameter: (its first element, its elements, its state) of every piece that has one.
  using Piece = std::tuple<int64_t, int64_t, std::unique_ptr<ParamState>>;
  std::vector<std::vector<Piece>> found(shard.parameters().size());
  const c10::Device device = shard.parameters().front().second.device();
  for (size_t r = 0; r < parts.size(); ++r) {
    auto part = read_archive(parts[r], "optimizer", device);
    for (const ZeroPiece& piece : shard.partition().pieces_of(static_cast<int32_t>(r))) {
      torch::serialize::InputArchive saved;
      if (!part.try_read(piece_key(piece), saved)) continue;
      auto state = new_state(kind);
      try {
        state->serialize(saved);
      } catch (const c10::Error& error) {
        fail_from(error, Code::Internal, "gathering the ZeRO optimizer state of rank " + std::to_string(r) + ": ");
      }
      found[piece.parameter].emplace_back(piece.begin, piece.numel, std::move(state));
    }
  }
  auto& states = whole.state();
  states.clear();
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i].empty()) continue;
    const at::Tensor& parameter = shard.parameters()[i].second;
    std::sort(found[i].begin(), found[i].end(),
              [](const Piece& a, const Piece& b) { return std::get<0>(a) < std::get<0>(b); });
    auto assembled = std::get<2>(found[i].front())->clone();
    const auto slots = slots_of(*assembled);
    for (size_t s = 0; s < slots.size(); ++s) {
      if (!slots[s]->defined()) continue;
      auto full = at::empty({parameter.numel()}, slots[s]->options());
      for (auto& [begin, numel, state] : found[i]) full.narrow(0, begin, numel).copy_(slots_of(*state)[s]->reshape({-1}));
      *slots[s] = full.view(parameter.sizes());
    }
    states[optimizer_state_key(states, parameter)] = std::move(assembled);
  }
}

void cut_piece_states(const ZeroShard& shard, const torch::optim::Optimizer& whole, torch::optim::Optimizer& pieces) {
  const auto& saved = whole.state();
  std::remove_const_t<std::remove_reference_t<decltype(pieces.state())>> cut;
  for (size_t k = 0; k < shard.pieces().size(); ++k) {
    const ZeroPiece& piece = shard.pieces()[k];
    const auto found = saved.find(optimizer_state_key(saved, shard.parameters()[piece.parameter].second));
    if (found == saved.end()) continue;
    auto state = found->second->clone();
    for (at::Tensor* slot : slots_of(*state)) {
      if (slot->defined()) *slot = slot->reshape({-1}).narrow(0, piece.begin, piece.numel).clone();
    }
    cut[optimizer_state_key(cut, shard.views()[k])] = std::move(state);
  }
  std::swap(pieces.state(), cut);
}

}  // namespace accel::train
