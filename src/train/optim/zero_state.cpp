#include "train/optim/zero_state.hpp"

#include <ATen/ops/empty.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
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

// Calls found(parameter index, piece) for each piece of `part` (one process's piece_states bytes, dropped once
// parsed), `index` giving a name's parameter.
void for_each_saved_piece(std::string part, size_t process, const std::unordered_map<std::string, size_t>& index,
                          const c10::Device& device, const std::string& kind,
                          const std::function<void(size_t, SavedPiece)>& found) {
  const std::string where = "optimizer state of process " + std::to_string(process);
  auto archive = read_archive(part, "optimizer", device);
  // The archive holds the tensors now: the bytes go before the pieces are used.
  std::string().swap(part);
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
    found(parameter->second, {begin_list[k], numel, std::move(state)});
  }
}

// The saved pieces' extents of one parameter, (first element, count): Error(InvalidArgument) naming it unless
// those holding tensors (if any) cover its `numel` elements once.
void check_covered(std::vector<std::pair<int64_t, int64_t>> extents, const std::string& name, int64_t numel) {
  std::sort(extents.begin(), extents.end());
  int64_t covered = 0;
  bool has_tensors = false;
  for (const auto& [begin, count] : extents) {
    if (count == 0) continue;
    has_tensors = true;
    if (begin != covered) break;
    covered += count;
  }
  if (has_tensors && covered != numel) {
    fail(Code::InvalidArgument, "optimizer state: the saved pieces of '" + name + "' cover its first " +
                                    std::to_string(covered) + " of " + std::to_string(numel) +
                                    " elements once (a process's part is missing or repeated)");
  }
}

// A piece as a part's index lists it (piece_states').
struct IndexedPiece {
  int64_t begin;
  int64_t numel;
  std::string name;
};

std::vector<IndexedPiece> parse_piece_index(const std::string& index, size_t process) {
  std::vector<IndexedPiece> pieces;
  std::istringstream lines(index);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    IndexedPiece piece{-1, -1, {}};
    fields >> piece.begin >> piece.numel;
    if (!fields || piece.begin < 0 || piece.numel < 0 || fields.get() != ' ') {
      fail(Code::InvalidArgument, "optimizer state of process " + std::to_string(process) + ": its piece index is damaged ('" + line + "')");
    }
    std::getline(fields, piece.name);
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

std::unordered_map<std::string, size_t> index_of_names(const std::vector<std::string>& names) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].empty()) index.emplace(names[i], i);
  }
  return index;
}

}  // namespace

SavedPieces piece_states(const ZeroShard& shard, const torch::optim::Optimizer& pieces, const std::vector<std::string>& names) {
  const auto& own = pieces.state();
  torch::serialize::OutputArchive archive;
  c10::List<std::string> saved_names;
  std::vector<int64_t> saved_begins;
  std::string index;
  bool indexable = true;
  // Under hybrid sharding every node holds the same pieces: the first node's ranks save them.
  const size_t saving = shard.partition().replica == 0 ? shard.pieces().size() : 0;
  for (size_t k = 0; k < saving; ++k) {
    const ZeroPiece& piece = shard.pieces()[k];
    const auto found = own.find(optimizer_state_key(own, shard.views()[k]));
    const std::string& name = names[piece.parameter];
    if (found == own.end() || name.empty()) continue;
    torch::serialize::OutputArchive saved;
    found->second->serialize(saved);
    archive.write(piece_key(saved_begins.size()), saved);
    saved_names.push_back(name);
    saved_begins.push_back(piece.begin);
    indexable = indexable && name.find('\n') == std::string::npos;
    index += std::to_string(piece.begin) + " " + std::to_string(state_numel(*found->second)) + " " + name + "\n";
  }
  archive.write(kPieceNames, c10::IValue(saved_names));
  archive.write(kPieceBegins, c10::IValue(saved_begins));
  return {archive_bytes(archive), indexable ? index : std::string()};
}

void assemble_piece_states(const PartReader& read_part, size_t count, const NamedTensors& parameters,
                           torch::optim::Optimizer& whole, const std::string& kind) {
  std::vector<std::string> names;
  for (const auto& entry : parameters) names.push_back(entry.first);
  const auto index = index_of_names(names);
  std::vector<std::vector<SavedPiece>> found(parameters.size());
  for (size_t r = 0; r < count; ++r) {
    for_each_saved_piece(read_part(r), r, index, parameters.front().second.device(), kind,
                         [&](size_t parameter, SavedPiece piece) { found[parameter].push_back(std::move(piece)); });
  }

  OptimizerStates states;
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i].empty()) continue;
    const at::Tensor& parameter = parameters[i].second;
    std::vector<std::pair<int64_t, int64_t>> extents;
    for (const SavedPiece& piece : found[i]) extents.emplace_back(piece.begin, piece.numel);
    check_covered(extents, parameters[i].first, parameter.numel());
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

OptimizerStates cut_saved_pieces(const PartReader& read_part, size_t count, const ZeroShard& shard,
                                 const std::vector<std::string>& names, const std::string& kind,
                                 const c10::Device& device, const PartIndexReader& read_index) {
  const auto index = index_of_names(names);
  const auto& pieces = shard.pieces();
  std::vector<std::vector<size_t>> pieces_of(names.size());  // by parameter: this rank's pieces of it
  for (size_t k = 0; k < pieces.size(); ++k) pieces_of[pieces[k].parameter].push_back(k);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> extents(names.size());  // by parameter: every saved piece's
  std::vector<std::unique_ptr<ParamState>> cut(pieces.size());                    // by own piece
  std::vector<std::unique_ptr<ParamState>> tensorless(pieces.size());  // by own piece: a state without tensors

  // Whether a piece a part lists holds anything of this rank's pieces (a state without tensors: any of them).
  const auto wanted = [&](size_t parameter, int64_t begin, int64_t numel) {
    return std::any_of(pieces_of[parameter].begin(), pieces_of[parameter].end(), [&](size_t k) {
      return numel == 0 || (std::max(pieces[k].begin, begin) < std::min(pieces[k].begin + pieces[k].numel, begin + numel));
    });
  };
  for (size_t r = 0; r < count; ++r) {
    const std::optional<std::string> listed = read_index ? read_index(r) : std::nullopt;
    if (listed && !listed->empty()) {
      std::vector<std::pair<size_t, IndexedPiece>> found;
      for (IndexedPiece& piece : parse_piece_index(*listed, r)) {
        const auto parameter = index.find(piece.name);
        if (parameter == index.end()) {
          fail(Code::InvalidArgument, "optimizer state of process " + std::to_string(r) + " holds a piece of '" +
                                          piece.name + "', which this optimizer does not have");
        }
        found.emplace_back(parameter->second, std::move(piece));
      }
      const bool needed = std::any_of(found.begin(), found.end(),
                                      [&](const auto& entry) { return wanted(entry.first, entry.second.begin, entry.second.numel); });
      if (!needed) {
        for (const auto& [parameter, piece] : found) extents[parameter].emplace_back(piece.begin, piece.numel);
        continue;
      }
    }
    for_each_saved_piece(read_part(r), r, index, device, kind, [&](size_t parameter, SavedPiece saved) {
      extents[parameter].emplace_back(saved.begin, saved.numel);
      for (const size_t k : pieces_of[parameter]) {
        const ZeroPiece& own = pieces[k];
        auto& state = cut[k];
        if (saved.numel == 0) {
          if (!tensorless[k]) tensorless[k] = saved.state->clone();
          continue;
        }
        const int64_t first = std::max(own.begin, saved.begin);
        const int64_t end = std::min(own.begin + own.numel, saved.begin + saved.numel);
        if (first >= end) continue;
        if (!state) {
          state = saved.state->clone();
          for (at::Tensor* slot : slots_of(*state)) {
            if (slot->defined()) *slot = at::empty({own.numel}, slot->options());
          }
        }
        const auto from = slots_of(*saved.state);
        const auto to = slots_of(*state);
        for (size_t s = 0; s < to.size(); ++s) {
          if (!to[s]->defined() || !from[s]->defined()) continue;
          to[s]->narrow(0, first - own.begin, end - first).copy_(from[s]->reshape({-1}).narrow(0, first - saved.begin, end - first));
        }
      }
    });
  }

  OptimizerStates states;
  for (size_t p = 0; p < names.size(); ++p) {
    if (extents[p].empty()) continue;
    check_covered(extents[p], names[p], shard.parameters()[p].second.numel());
    for (const size_t k : pieces_of[p]) {
      auto& state = cut[k] ? cut[k] : tensorless[k];
      if (state) states[optimizer_state_key(states, shard.views()[k])] = std::move(state);
    }
  }
  return states;
}

OptimizerStates cut_piece_states(const ZeroShard& shard, const torch::optim::Optimizer& whole) {
  const auto& saved = whole.state();
  OptimizerStates cut;
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
  return cut;
}

}  // namespace accel::train
