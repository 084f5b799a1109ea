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
#include <unordered_map>
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

std::string piece_key(size_t index) { return "piece_" + std::to_string(index); }

constexpr const char* kPieceNames = "accel/piece_names";
constexpr const char* kPieceBegins = "accel/piece_begins";

// A parameter's piece of state as one process saved it.
struct SavedPiece {
  int64_t begin;
  int64_t numel;  // of its state tensors; 0 for a state without any
  std::unique_ptr<ParamState> state;
};

int64_t state_numel(ParamState& state) {
  for (const at::Tensor* slot : slots_of(state)) {
    if (slot->defined()) return slot->numel();
  }
  return 0;
}

// The pieces of `part` (one process's piece_states bytes), added to `found` by the index of their parameter.
void read_part(const std::string& part, size_t process, const std::unordered_map<std::string, size_t>& index,
               const NamedTensors& parameters, const std::string& kind, std::vector<std::vector<SavedPiece>>& found) {
  const std::string where = "optimizer state of process " + std::to_string(process);
  auto archive = read_archive(part, "optimizer", parameters.front().second.device());
  c10::IValue names;
  c10::IValue begins;
  if (!archive.try_read(kPieceNames, names) || !archive.try_read(kPieceBegins, begins) || !names.isList() ||
      !begins.isIntList() || names.toListRef().size() != begins.toIntList().size()) {
    fail(Code::InvalidArgument, where + ": not the state of a process's ZeRO pieces");
  }
  const auto& name_list = names.toListRef();
  const auto begin_list = begins.toIntVector();
  for (size_t k = 0; k < begin_list.size(); ++k) {
    const std::string name = name_list[k].isString() ? name_list[k].toStringRef() : std::string();
    const auto parameter = index.find(name);
    if (parameter == index.end()) {
      fail(Code::InvalidArgument, where + " holds a piece of '" + name + "', which this optimizer does not have");
    }
    torch::serialize::InputArchive saved;
    if (!archive.try_read(piece_key(k), saved)) fail(Code::InvalidArgument, where + ": the piece of '" + name + "' is missing");
    auto state = new_state(kind);
    try {
      state->serialize(saved);
    } catch (const c10::Error& error) {
      fail_from(error, Code::InvalidArgument, where + ": the piece of '" + name + "' is unreadable: ");
    }
    const int64_t numel = state_numel(*state);
    found[parameter->second].push_back({begin_list[k], numel, std::move(state)});
  }
}

}  // namespace

std::string piece_states(const ZeroShard& shard, const torch::optim::Optimizer& pieces,
                         const std::vector<std::string>& names) {
  const auto& own = pieces.state();
  torch::serialize::OutputArchive archive;
  c10::List<std::string> saved_names;
  std::vector<int64_t> saved_begins;
  for (size_t k = 0; k < shard.pieces().size(); ++k) {
    const ZeroPiece& piece = shard.pieces()[k];
    const auto found = own.find(optimizer_state_key(own, shard.views()[k]));
    if (found == own.end() || names[piece.parameter].empty()) continue;
    torch::serialize::OutputArchive saved;
    found->second->serialize(saved);
    archive.write(piece_key(saved_begins.size()), saved);
    saved_names.push_back(names[piece.parameter]);
    saved_begins.push_back(piece.begin);
  }
  archive.write(kPieceNames, c10::IValue(saved_names));
  archive.write(kPieceBegins, c10::IValue(saved_begins));
  return archive_bytes(archive);
}

void assemble_piece_states(const std::vector<std::string>& parts, const NamedTensors& parameters,
                           torch::optim::Optimizer& whole, const std::string& kind) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < parameters.size(); ++i) index.emplace(parameters[i].first, i);
  std::vector<std::vector<SavedPiece>> found(parameters.size());
  for (size_t r = 0; r < parts.size(); ++r) read_part(parts[r], r, index, parameters, kind, found);

  std::remove_reference_t<decltype(whole.state())> states;
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i].empty()) continue;
    const at::Tensor& parameter = parameters[i].second;
    std::sort(found[i].begin(), found[i].end(), [](const SavedPiece& a, const SavedPiece& b) { return a.begin < b.begin; });
    int64_t covered = 0;
    for (const SavedPiece& piece : found[i]) {
      if (piece.numel == 0) continue;
      if (piece.begin != covered) break;
      covered += piece.numel;
    }
    const bool has_tensors = std::any_of(found[i].begin(), found[i].end(), [](const SavedPiece& p) { return p.numel > 0; });
    if (has_tensors && covered != parameter.numel()) {
      fail(Code::InvalidArgument, "optimizer state: the saved pieces of '" + parameters[i].first + "' cover its first " +
                                      std::to_string(covered) + " of " + std::to_string(parameter.numel()) +
                                      " elements once (a process's part is missing or repeated)");
    }
    auto assembled = found[i].front().state->clone();
    const auto slots = slots_of(*assembled);
    for (size_t s = 0; s < slots.size(); ++s) {
      if (!slots[s]->defined()) continue;
      auto full = at::empty({parameter.numel()}, slots[s]->options());
      for (SavedPiece& piece : found[i]) full.narrow(0, piece.begin, piece.numel).copy_(slots_of(*piece.state)[s]->reshape({-1}));
      *slots[s] = full.view(parameter.sizes());
    }
    states[optimizer_state_key(states, parameter)] = std::move(assembled);
  }
  std::swap(whole.state(), states);
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
