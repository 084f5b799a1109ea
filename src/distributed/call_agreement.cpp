#include "distributed/call_agreement.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "distributed/group/process_group.hpp"
#include "distributed/state.hpp"

namespace accel::distributed {

namespace {

constexpr int64_t kMaxDims = 64;
constexpr int64_t kContextWords = 3;  // the announced operation's name, up to 24 bytes
enum Field : int64_t {
  kKind,
  kReduction,
  kRoot,
  kDim,
  kFlag,
  kCount,
  kBytes,
  kDigest,
  kInputDims,  // -1: no tensor
  kInputType,
  kInputNumel,
  kOutputNumel,
  kOutputType,
  kOutputOnDevice,
  kContext,
  kSizes = kContext + kContextWords,
  kRow = kSizes + kMaxDims,
};

}  // namespace

const char* kind_name(CallKind kind) {
  switch (kind) {
    case CallKind::WaitForEveryone: return "wait_for_everyone";
    case CallKind::Shutdown: return "shutdown";
    case CallKind::Gather: return "gather";
    case CallKind::GatherForMetrics: return "gather_for_metrics";
    case CallKind::GatherBytes: return "gather_bytes";
    case CallKind::Reduce: return "reduce";
    case CallKind::ReduceNamed: return "reduce_named";
    case CallKind::Broadcast: return "broadcast";
    case CallKind::BroadcastBytes: return "broadcast_bytes";
    case CallKind::PadAcrossProcesses: return "pad_across_processes";
    case CallKind::ReduceScatter: return "reduce_scatter";
    case CallKind::AllGather: return "all_gather";
    case CallKind::PrepareModel: return "prepare_model";
    case CallKind::CheckpointFolder: return "checkpoint_folder";
  }
  return "an unknown collective";
}

namespace {

bool has_reduction(CallKind kind) {
  return kind == CallKind::Reduce || kind == CallKind::ReduceNamed || kind == CallKind::ReduceScatter;
}
bool has_root(CallKind kind) { return kind == CallKind::Broadcast || kind == CallKind::BroadcastBytes; }

at::Tensor describe(const Call& call, const std::string& context) {
  auto row = at::zeros({kRow}, at::kLong);
  auto* field = row.data_ptr<int64_t>();
  field[kKind] = static_cast<int64_t>(call.kind);
  Reduction reduction = reduction_named(call.reduction);
  // reduce_scatter reduces by sum or mean only.
  if (call.kind == CallKind::ReduceScatter && reduction == Reduction::Max) reduction = Reduction::Unknown;
  field[kReduction] = static_cast<int64_t>(reduction);
  field[kRoot] = call.root;
  field[kDim] = call.dim;
  field[kFlag] = call.flag;
  field[kCount] = call.count;
  field[kBytes] = call.bytes;
  field[kDigest] = call.digest;
  field[kInputDims] = -1;
  if (call.input.defined()) {
    field[kInputDims] = call.input.dim();
    field[kInputType] = static_cast<int64_t>(call.input.scalar_type());
    field[kInputNumel] = call.input.numel();
    for (int64_t d = 0; d < std::min(call.input.dim(), kMaxDims); ++d) field[kSizes + d] = call.input.size(d);
  }
  if (call.output.defined()) {
    field[kOutputNumel] = call.output.numel();
    field[kOutputType] = static_cast<int64_t>(call.output.scalar_type());
    field[kOutputOnDevice] = !call.input.defined() || call.output.device() == call.input.device() ? 1 : 0;
  }
  std::memcpy(field + kContext, context.data(), std::min<size_t>(context.size(), kContextWords * 8));
  return row;
}

std::string context_of(const int64_t* field) {
  const char* text = reinterpret_cast<const char*>(field + kContext);
  return std::string(text, strnlen(text, kContextWords * 8));
}

// Fails on every rank alike (they all read the same rows) when `differs` holds between process 0 and another.
template <class Differs>
void require_same(const Agreement& calls, Differs differs, Code code, const std::string& heading) {
  for (int64_t r = 1; r < calls.world(); ++r) {
    if (differs(0, r)) fail(code, calls.per_process(heading));
  }
}

}  // namespace

Reduction reduction_named(const std::string& name) {
  if (name.empty()) return Reduction::None;
  if (name == "sum") return Reduction::Sum;
  if (name == "mean") return Reduction::Mean;
  if (name == "max") return Reduction::Max;
  return Reduction::Unknown;
}

namespace {

const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return "none";
    case Reduction::Sum: return "sum";
    case Reduction::Mean: return "mean";
    case Reduction::Max: return "max";
    case Reduction::Unknown: break;
  }
  return "an unknown reduction";
}

}  // namespace

const int64_t* Agreement::row(int64_t rank) const { return rows_[rank].data_ptr<int64_t>(); }
CallKind Agreement::kind(int64_t rank) const { return static_cast<CallKind>(row(rank)[kKind]); }
int64_t Agreement::root(int64_t rank) const { return row(rank)[kRoot]; }
int64_t Agreement::bytes(int64_t rank) const { return row(rank)[kBytes]; }
int64_t Agreement::digest(int64_t rank) const { return row(rank)[kDigest]; }
int64_t Agreement::dims(int64_t rank) const { return std::max<int64_t>(0, row(rank)[kInputDims]); }
int64_t Agreement::size(int64_t rank, int64_t dim) const { return row(rank)[kSizes + dim]; }
c10::ScalarType Agreement::dtype(int64_t rank) const { return static_cast<c10::ScalarType>(row(rank)[kInputType]); }
int64_t Agreement::numel(int64_t rank) const { return row(rank)[kInputNumel]; }
int64_t Agreement::output_numel(int64_t rank) const { return row(rank)[kOutputNumel]; }
c10::ScalarType Agreement::output_dtype(int64_t rank) const {
  return static_cast<c10::ScalarType>(row(rank)[kOutputType]);
}
bool Agreement::output_on_input_device(int64_t rank) const { return row(rank)[kOutputOnDevice] != 0; }

std::string Agreement::input_text(int64_t rank) const {
  const int64_t* field = row(rank);
  if (field[kInputDims] > kMaxDims) return std::to_string(field[kInputDims]) + " dimensions";
  std::string text = "[";
  for (int64_t d = 0; d < field[kInputDims]; ++d) text += (d ? ", " : "") + std::to_string(field[kSizes + d]);
  return text + "] " + c10::toString(dtype(rank));
}

bool Agreement::same_input(int64_t a, int64_t b, bool skip_dim0) const {
  const int64_t *x = row(a), *y = row(b);
  if (x[kInputDims] != y[kInputDims] || x[kInputType] != y[kInputType]) return false;
  const int64_t from = kSizes + (skip_dim0 ? 1 : 0);
  return std::equal(x + from, x + kRow, y + from);
}

std::string Agreement::describe(int64_t rank) const {
  const int64_t* field = row(rank);
  const CallKind call = kind(rank);
  std::string text = kind_name(call);
  if (has_reduction(call)) text += std::string(" (") + reduction_name(static_cast<Reduction>(field[kReduction])) + ")";
  if (call == CallKind::PadAcrossProcesses) {
    text += " (dim " + std::to_string(field[kDim]) + (field[kFlag] ? ", pad_first)" : ")");
  }
  if (has_root(call)) text += " from process " + std::to_string(field[kRoot]);
  if (call == CallKind::GatherBytes) text += " of " + std::to_string(field[kBytes]) + " bytes";
  if (call == CallKind::ReduceNamed) text += " of " + std::to_string(field[kCount]) + " named tensors";
  if (field[kInputDims] >= 0) text += " of " + input_text(rank);
  if (call == CallKind::ReduceScatter || call == CallKind::AllGather) {
    text += " into " + std::to_string(field[kOutputNumel]) + " elements";
  }
  const std::string context = context_of(field);
  return context.empty() ? text : context + " (" + text + ")";
}

std::string Agreement::per_process(const std::string& heading) const {
  std::string text = heading;
  for (int64_t r = 0; r < world(); ++r) text += "\n  - process " + std::to_string(r) + ": " + describe(r);
  return text;
}

std::string Agreement::inputs_per_process(const std::string& heading) const {
  std::string text = heading;
  for (int64_t r = 0; r < world(); ++r) text += "\n  - process " + std::to_string(r) + ": " + input_text(r);
  return text;
}

Agreement describe_alone(const Call& call) { return Agreement(describe(call, "").unsqueeze(0)); }

Agreement agree(State& state, ProcessGroup& group, const Call& mine) {
  const char* what = kind_name(mine.kind);
  const at::Tensor sent = describe(mine, group.announced_operation());
  // Bookkeeping travels on the backend's device (NCCL moves CUDA memory only) and is read on the CPU.
  const at::Device device(state.backend() == "nccl" ? state.device() : "cpu");
  auto all = at::empty({group.world_size(), kRow}, at::TensorOptions(at::kLong).device(device));
  std::vector<at::Tensor> rows;
  for (int64_t r = 0; r < group.world_size(); ++r) rows.push_back(all[r]);
  group.allgather(rows, sent.to(device), what);
  Agreement calls(all.cpu());

  const auto same_call = [&](int64_t a, int64_t b) {
    return calls.kind(a) == calls.kind(b) && context_of(calls.row(a)) == context_of(calls.row(b));
  };
  require_same(calls, [&](int64_t a, int64_t b) { return !same_call(a, b); }, Code::InvalidState,
               "collectives out of step: the processes called different collectives at the same point (every "
               "process must call the same collectives in the same order):");
  for (int64_t r = 0; r < calls.world(); ++r) {
    if (calls.row(r)[kInputDims] > kMaxDims) {
      fail(Code::InvalidArgument, std::string(what) + ": process " + std::to_string(r) + "'s tensor has " +
                                      std::to_string(calls.row(r)[kInputDims]) + " dimensions; at most 64 are supported");
    }
  }
  if (has_reduction(mine.kind)) {
    for (int64_t r = 0; r < calls.world(); ++r) {
      if (calls.row(r)[kReduction] != static_cast<int64_t>(Reduction::Unknown)) continue;
      if (r == group.rank()) {
        fail(Code::InvalidArgument, std::string(what) + ": unknown reduction '" + mine.reduction + "' (expected " +
                                        (mine.kind == CallKind::ReduceScatter ? "sum or mean)" : "sum, mean or max)"));
      }
      fail(Code::InvalidArgument, std::string(what) + ": process " + std::to_string(r) + " asked for an unknown reduction");
    }
    require_same(calls, [&](int64_t a, int64_t b) { return calls.row(a)[kReduction] != calls.row(b)[kReduction]; },
                 Code::InvalidArgument, std::string(what) + ": the processes asked for different reductions:");
  }
  if (has_root(mine.kind)) {
    require_same(calls, [&](int64_t a, int64_t b) { return calls.root(a) != calls.root(b); }, Code::InvalidArgument,
                 std::string(what) + ": the processes named different source processes:");
    if (calls.root(0) < 0 || calls.root(0) >= calls.world()) {
      fail(Code::OutOfRange, std::string(what) + ": from_process " + std::to_string(calls.root(0)) +
                                 " is outside [0, " + std::to_string(calls.world()) + ")");
    }
  }
  require_same(calls,
               [&](int64_t a, int64_t b) {
                 return calls.row(a)[kDim] != calls.row(b)[kDim] || calls.row(a)[kFlag] != calls.row(b)[kFlag];
               },
               Code::InvalidArgument, std::string(what) + ": the processes asked for different dims or pad_first:");
  return calls;
}

}  // namespace accel::distributed
