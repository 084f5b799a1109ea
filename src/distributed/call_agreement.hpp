// Before its data moves, each collective a user calls (collectives.hpp, sharded_collectives.hpp,
// State::wait_for_everyone) exchanges one description of this rank's call, of the same size whatever the
// collective: which one it is, its reduction, root or dim, the tensor's dtype and shape. Two things follow.
// The backend never meets two different collectives whose messages differ in size (Gloo aborts the whole
// process when a message is longer than the one it expects: an all-gather on one rank and a gather on the
// other used to end that way). And every rank reads every rank's call and reaches the same verdict, so a
// rank in another collective, or with another reduction or root, fails every rank at once, naming each
// process's call; nothing else was sent, so the group stays usable.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace accel::distributed {

class ProcessGroup;
class State;

enum class CallKind : int64_t {
  WaitForEveryone = 1,
  Shutdown,
  Gather,
  GatherForMetrics,
  GatherBytes,
  Reduce,
  ReduceNamed,
  Broadcast,
  BroadcastBytes,
  PadAcrossProcesses,
  ReduceScatter,
  AllGather,
  PrepareModel,  // the models' parameters and buffers compared before prepare's first broadcast
  CheckpointFolder,  // the folder save_state / load_state name, compared before anything is written or read
};

enum class Reduction : int64_t { None = 0, Sum, Mean, Max, Unknown };

// "gather", as messages name the collective.
const char* kind_name(CallKind kind);

// "sum", "mean", "max"; None for ""; Unknown for anything else.
Reduction reduction_named(const std::string& name);

// This rank's side of a collective; what a kind does not use stays at its default.
struct Call {
  explicit Call(CallKind call_kind, std::string call_reduction = "")
      : kind(call_kind), reduction(std::move(call_reduction)) {}

  CallKind kind;
  std::string reduction;  // reduce, reduce_named, reduce_scatter: as the caller wrote it ("sum")
  int64_t root = 0;    // broadcast, broadcast_bytes: the process whose values every rank gets
  int64_t dim = 0;     // pad_across_processes
  int64_t flag = 0;    // pad_across_processes: pad_first
  int64_t count = 0;   // reduce_named: the number of tensors
  int64_t bytes = 0;   // gather_bytes: this rank's length; broadcast_bytes: the root's; reduce_named: its description's
  int64_t digest = 0;  // reduce_named: of the description of its tensors (names, shapes, dtypes)
  at::Tensor input;    // undefined: the collective takes no tensor
  at::Tensor output;   // reduce_scatter, all_gather: the caller's output
};

// Every rank's call, as each rank read it after the exchange. Sizes beyond the 64th dimension are not
// carried (a tensor with more dimensions is refused).
class Agreement {
 public:
  explicit Agreement(at::Tensor rows) : rows_(std::move(rows)) {}

  int64_t world() const { return rows_.size(0); }
  CallKind kind(int64_t rank) const;
  int64_t root(int64_t rank) const;
  int64_t bytes(int64_t rank) const;
  int64_t digest(int64_t rank) const;
  int64_t dims(int64_t rank) const;  // the input's; 0-d counts as 0
  int64_t size(int64_t rank, int64_t dim) const;
  c10::ScalarType dtype(int64_t rank) const;
  int64_t numel(int64_t rank) const;
  int64_t output_numel(int64_t rank) const;
  c10::ScalarType output_dtype(int64_t rank) const;
  bool output_on_input_device(int64_t rank) const;
  // "[4, 2] Float"
  std::string input_text(int64_t rank) const;
  // Whether ranks a and b have the same dtype and the same dims and sizes, but for dim 0 when skip_dim0.
  bool same_input(int64_t a, int64_t b, bool skip_dim0) const;
  // "process 1: reduce (mean) of [3] Float", one line per process, after `heading`.
  std::string per_process(const std::string& heading) const;
  // "process 1: [3] Float", each process's input, one line per process, after `heading`.
  std::string inputs_per_process(const std::string& heading) const;

 private:
  friend Agreement agree(State& state, ProcessGroup& group, const Call& mine);
  const int64_t* row(int64_t rank) const;
  std::string describe(int64_t rank) const;
  at::Tensor rows_;
};

// Exchanges `mine` with every rank of `group` (one all-gather of a fixed-size row) and checks what every
// collective needs: the same collective everywhere (Error(InvalidState) naming each process's, when the
// kinds differ or one rank is inside an announced operation such as save_state that another is not), the
// same reduction (Error(InvalidArgument); an unknown one is refused naming it), the same root
// (Error(InvalidArgument); outside [0, world) Error(OutOfRange)), the same dim and flag, at most 64
// dimensions (Error(InvalidArgument)). The same verdict on every rank; the tensors' shapes are the caller's
// to compare, on the Agreement.
Agreement agree(State& state, ProcessGroup& group, const Call& mine);

// This rank's call alone, as a one-row Agreement, for the checks a rank makes without the exchange.
Agreement describe_alone(const Call& call);

}  // namespace accel::distributed
