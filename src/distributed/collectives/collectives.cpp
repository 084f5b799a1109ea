#include "distributed/collectives/collectives.hpp"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>

#include "core/error.hpp"
#include "distributed/call_agreement.hpp"

namespace accel::distributed {

namespace {

[[noreturn]] void shape_mismatch(const Agreement& calls, const char* what, const std::string& why) {
  fail(Code::ShapeMismatch, calls.inputs_per_process(std::string(what) + ": " + why + " across processes:"));
}

// Collectives work on CPU or the state's CUDA device; contiguous memory is what c10d sends.
at::Tensor communicable(const at::Tensor& tensor, const char* what) {
  if (!tensor.defined()) fail(Code::InvalidArgument, std::string(what) + ": the tensor is undefined");
  return tensor.dim() == 0 ? tensor.reshape({1}).contiguous() : tensor.contiguous();
}

// Bookkeeping tensors travel on the backend's device (NCCL only moves CUDA memory) and are read on the CPU.
at::Device comm_device(const State& state) { return at::Device(state.backend() == "nccl" ? state.device() : "cpu"); }

// Views of `out` holding one dim-0 slice of `rows` rows per rank, for allgather to fill.
std::vector<at::Tensor> rank_slices(const at::Tensor& out, int64_t world, int64_t rows) {
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < world; ++r) parts.push_back(out.narrow(0, r * rows, rows));
  return parts;
}

// Every rank's dim-0 size, after checking that dtypes and the other dimensions agree (on every rank alike).
std::vector<int64_t> rows_per_rank(const Agreement& calls, const char* what) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < calls.world(); ++r) {
    if (!calls.same_input(0, r, /*skip_dim0=*/true)) shape_mismatch(calls, what, "dtypes or sizes beyond dim 0 differ");
    rows.push_back(calls.size(r, 0));
  }
  return rows;
}

// With check_shapes on, every rank learns every rank's call and all fail together on a difference.
void agree_on_same_shapes(State& state, ProcessGroup& group, const Call& call, const char* what) {
  if (!state.check_shapes()) return;
  const Agreement calls = agree(state, group, call);
  for (int64_t r = 1; r < calls.world(); ++r) {
    if (!calls.same_input(0, r, /*skip_dim0=*/false)) shape_mismatch(calls, what, "shapes or dtypes differ");
  }
}

// The exchange behind gather_bytes, once every rank knows every rank's length.
std::vector<std::string> exchange_bytes(State& state, ProcessGroup& group, const std::string& bytes,
                                        const std::vector<int64_t>& lengths, const char* what) {
  const int64_t world = group.world_size();
  const int64_t longest = std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  auto mine = at::zeros({longest}, at::kByte);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(mine.data_ptr<uint8_t>()));
  mine = mine.to(comm_device(state));
  auto all = at::empty({world * longest}, mine.options());
  auto parts = rank_slices(all, world, longest);
  group.allgather(parts, mine, what);
  all = all.cpu();
  std::vector<std::string> result;
  const auto* base = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
  for (int64_t r = 0; r < world; ++r) result.emplace_back(base + r * longest, static_cast<size_t>(lengths[r]));
  return result;
}

}  // namespace

namespace {

// Accelerate's gather needs equal shapes; here each rank's rows are padded to the longest, gathered, and
// the padding cut out again, so ranks with fewer rows (an uneven last batch) need no pad_across_processes.
at::Tensor gather_as(State& state, const at::Tensor& input, CallKind kind) {
  const char* what = kind == CallKind::Gather ? "gather" : "gather_for_metrics";
  auto tensor = communicable(input, what);
  ProcessGroup* group = state.group(what);
  if (group == nullptr) return tensor.clone();
  Call call(kind);
  call.input = tensor;
  const std::vector<int64_t> rows = rows_per_rank(agree(state, *group, call), what);
  const int64_t longest = *std::max_element(rows.begin(), rows.end());
  std::vector<int64_t> sizes = tensor.sizes().vec();
  if (longest == 0) return at::empty(sizes, tensor.options());  // every rank knows: nothing to send
  if (tensor.size(0) < longest) {
    sizes[0] = longest;
    auto padded = at::zeros(sizes, tensor.options());
    padded.narrow(0, 0, tensor.size(0)).copy_(tensor);
    tensor = padded;
  }
  sizes[0] = longest * group->world_size();
  auto out = at::empty(sizes, tensor.options());
  auto parts = rank_slices(out, group->world_size(), longest);
  group->allgather(parts, tensor, what);
  if (std::all_of(rows.begin(), rows.end(), [&](int64_t r) { return r == longest; })) return out;
  std::vector<at::Tensor> kept;
  for (size_t r = 0; r < rows.size(); ++r) kept.push_back(parts[r].narrow(0, 0, rows[r]));
  return at::cat(kept, 0);
}

}  // namespace

at::Tensor gather(State& state, const at::Tensor& input) { return gather_as(state, input, CallKind::Gather); }

at::Tensor gather_for_metrics(State& state, const at::Tensor& input) {
  auto all = gather_as(state, input, CallKind::GatherForMetrics);
  const auto progress = state.gradient_state().active();
  if (progress.end_of_dataloader && progress.remainder > 0 && progress.remainder < all.size(0)) {
    return all.narrow(0, 0, progress.remainder);
  }
  return all;
}

std::vector<std::string> gather_bytes(State& state, const std::string& bytes) {
  const char* what = "gather_bytes";
  ProcessGroup* group = state.group(what);
  if (group == nullptr) return {bytes};
  Call call(CallKind::GatherBytes);
  call.bytes = static_cast<int64_t>(bytes.size());
  const Agreement calls = agree(state, *group, call);
  std::vector<int64_t> lengths;
  for (int64_t r = 0; r < calls.world(); ++r) lengths.push_back(calls.bytes(r));
  return exchange_bytes(state, *group, bytes, lengths, what);
}

void all_or_none(State& state, const std::function<void()>& body, const std::string& what) {
  std::exception_ptr own;
  std::string problem;
  try {
    body();
  } catch (const std::exception& error) {
    own = std::current_exception();
    problem = message_of(error);
    // An empty message would read as success to the other ranks.
    if (problem.empty()) problem = "failed";
  }
  std::vector<std::string> problems;
  try {
    problems = gather_bytes(state, problem);
  } catch (...) {
    if (own) std::rethrow_exception(own);  // the cause, rather than the exchange that followed it
    throw;
  }
  if (own) std::rethrow_exception(own);
  for (size_t rank = 0; rank < problems.size(); ++rank) {
    if (!problems[rank].empty()) fail(Code::PeerFailed, "rank " + std::to_string(rank) + " " + what + ": " + problems[rank]);
  }
}

void broadcast_bytes(State& state, std::string& bytes, int32_t from_process) {
  const char* what = "broadcast_bytes";
  ProcessGroup* group = state.group(what);
  if (group == nullptr) return;
  Call call(CallKind::BroadcastBytes);
  call.root = from_process;
  call.bytes = static_cast<int64_t>(bytes.size());
  const int64_t size = agree(state, *group, call).bytes(from_process);
  if (size == 0) {
    bytes.clear();
    return;
  }
  auto payload = at::empty({size}, at::kByte);
  if (group->rank() == from_process) std::memcpy(payload.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  payload = payload.to(comm_device(state));
  group->broadcast(payload, from_process, what);
  payload = payload.cpu();
  bytes.assign(reinterpret_cast<const char*>(payload.data_ptr<uint8_t>()), static_cast<size_t>(size));
}

namespace {

void require_reduction(const std::string& reduction) {
  if (reduction != "sum" && reduction != "mean" && reduction != "max") {
    fail(Code::InvalidArgument, "reduce: unknown reduction '" + reduction + "' (expected sum, mean or max)");
  }
}

// `name` is the leaf's, or empty for a lone tensor.
void require_reducible(const at::Tensor& tensor, const std::string& reduction, const std::string& name) {
  if (reduction == "mean" && !at::isFloatingType(tensor.scalar_type())) {
    fail(Code::Dtype, "reduce: 'mean' needs a floating-point tensor, " +
                          (name.empty() ? std::string("got ") : "'" + name + "' is ") +
                          c10::toString(tensor.scalar_type()));
  }
}

// One line per leaf: name, dtype and sizes, for the cross-rank comparison and its message.
std::string describe_leaves(const NamedTensors& leaves) {
  std::string text;
  for (const auto& [name, tensor] : leaves) {
    text += "'" + name + "': " + c10::str(tensor.sizes()) + " " + c10::toString(tensor.scalar_type()) + "; ";
  }
  return text.empty() ? "nothing" : text.substr(0, text.size() - 2);
}

// Every rank's text when they are not all the same: the texts' lengths and digests travel in the agreement
// of `call`, and the texts themselves only when they differ.
std::optional<std::vector<std::string>> texts_if_different(State& state, ProcessGroup& group, Call call,
                                                           const std::string& text) {
  call.bytes = static_cast<int64_t>(text.size());
  call.digest = static_cast<int64_t>(std::hash<std::string>{}(text));
  const Agreement calls = agree(state, group, call);
  bool same = true;
  std::vector<int64_t> lengths;
  for (int64_t r = 0; r < calls.world(); ++r) {
    same = same && calls.bytes(r) == calls.bytes(0) && calls.digest(r) == calls.digest(0);
    lengths.push_back(calls.bytes(r));
  }
  if (same) return std::nullopt;
  return exchange_bytes(state, group, text, lengths, "texts that differ");
}

// With check_shapes on, every rank's leaves are compared, failing on every rank alike where they differ.
void agree_on_same_leaves(State& state, ProcessGroup& group, const NamedTensors& leaves, const std::string& reduction) {
  if (!state.check_shapes()) return;
  Call call(CallKind::ReduceNamed, reduction);
  call.count = static_cast<int64_t>(leaves.size());
  const auto all = texts_if_different(state, group, call, describe_leaves(leaves));
  if (!all) return;
  std::string text = "reduce: the named tensors' names, shapes or dtypes differ across processes:";
  for (size_t r = 0; r < all->size(); ++r) text += "\n  - process " + std::to_string(r) + ": " + (*all)[r];
  fail(Code::ShapeMismatch, text);
}

ReduceKind reduce_kind(const std::string& reduction) { return reduction == "max" ? ReduceKind::Max : ReduceKind::Sum; }

}  // namespace

at::Tensor reduce(State& state, const at::Tensor& input, const std::string& reduction) {
  const char* what = "reduce";
  if (!input.defined()) fail(Code::InvalidArgument, "reduce: the tensor is undefined");
  auto out = input.clone(at::MemoryFormat::Contiguous);
  ProcessGroup* group = state.group(what);
  if (group != nullptr) {
    Call call(CallKind::Reduce, reduction);
    call.input = out;
    agree_on_same_shapes(state, *group, call, what);
  }
  // After the exchange (which refuses an unknown reduction on every rank), so that every rank refuses alike.
  require_reduction(reduction);
  require_reducible(input, reduction, "");
  if (group == nullptr) return out;
  group->transport().allreduce(out, reduce_kind(reduction), what);
  if (reduction == "mean") out.div_(group->world_size());
  return out;
}

NamedTensors reduce(State& state, const NamedTensors& inputs, const std::string& reduction) {
  const char* what = "reduce";
  NamedTensors out;
  for (const auto& [name, tensor] : inputs) {
    if (!tensor.defined()) fail(Code::InvalidArgument, "reduce: '" + name + "' is undefined");
    add_field(out, name, tensor.clone(at::MemoryFormat::Contiguous));
  }
  ProcessGroup* group = state.group(what);
  if (group != nullptr) agree_on_same_leaves(state, *group, out, reduction);
  // After the exchange, so that every rank refuses alike.
  require_reduction(reduction);
  for (const auto& [name, tensor] : out) require_reducible(tensor, reduction, name);
  if (group == nullptr) return out;
  // One all-reduce per dtype for all its leaves, in the order of the dtypes' first leaves.
  std::vector<std::vector<at::Tensor*>> by_type;
  for (auto& field : out) {
    auto same = std::find_if(by_type.begin(), by_type.end(), [&](const std::vector<at::Tensor*>& leaves) {
      return leaves.front()->scalar_type() == field.second.scalar_type();
    });
    if (same == by_type.end()) {
      by_type.push_back({&field.second});
    } else {
      same->push_back(&field.second);
    }
  }
  for (const auto& leaves : by_type) {
    std::vector<at::Tensor> flat_parts;
    for (const auto* leaf : leaves) flat_parts.push_back(leaf->reshape({-1}));
    auto flat = at::cat(flat_parts);
    group->transport().allreduce(flat, reduce_kind(reduction), what);
    if (reduction == "mean") flat.div_(group->world_size());
    int64_t offset = 0;
    for (auto* leaf : leaves) {
      leaf->copy_(flat.narrow(0, offset, leaf->numel()).view(leaf->sizes()));
      offset += leaf->numel();
    }
  }
  return out;
}

std::optional<std::vector<std::string>> texts_if_different(State& state, CallKind kind, const std::string& text) {
  ProcessGroup* group = state.group(kind_name(kind));
  if (group == nullptr) return std::nullopt;
  return texts_if_different(state, *group, Call(kind), text);
}

void broadcast(State& state, at::Tensor& tensor, int32_t from_process) {
  const char* what = "broadcast";
  if (!tensor.defined()) fail(Code::InvalidArgument, "broadcast: the tensor is undefined");
  ProcessGroup* group = state.group(what);
  if (group != nullptr) {
    Call call(CallKind::Broadcast);
    call.root = from_process;
    call.input = tensor;
    agree_on_same_shapes(state, *group, call, what);
  }
  // After the exchange (which compares the sources and refuses one out of range on every rank alike).
  const int32_t world = state.launch().world_size;
  if (from_process < 0 || from_process >= world) {
    fail(Code::OutOfRange, "broadcast: from_process " + std::to_string(from_process) + " is outside [0, " +
                               std::to_string(world) + ")");
  }
  if (group == nullptr) return;
  if (tensor.is_contiguous()) {
    group->broadcast(tensor, from_process, what);
    return;
  }
  auto staging = tensor.contiguous();
  group->broadcast(staging, from_process, what);
  tensor.copy_(staging);
}

at::Tensor pad_across_processes(State& state, const at::Tensor& input, int64_t dim, double pad_value, bool pad_first) {
  const char* what = "pad_across_processes";
  if (!input.defined()) fail(Code::InvalidArgument, "pad_across_processes: the tensor is undefined");
  const int64_t ndim = input.dim();
  // A dim in range is compared in its non-negative form, so that -1 on one rank agrees with ndim - 1 on another.
  const int64_t asked = dim;
  if (dim >= -ndim && dim < 0) dim += ndim;
  ProcessGroup* group = state.group(what);
  std::optional<Agreement> calls;
  if (group != nullptr) {
    Call call(CallKind::PadAcrossProcesses);
    call.dim = dim;
    call.flag = pad_first ? 1 : 0;
    call.input = input;
    calls = agree(state, *group, call);
    // Shapes first, dim after: with the same number of dimensions everywhere, a bad dim fails on every rank.
    for (int64_t r = 0; r < calls->world(); ++r) {
      if (calls->dims(r) != ndim) shape_mismatch(*calls, what, "the number of dimensions differs");
    }
  }
  if (dim < 0 || dim >= ndim) {
    fail(Code::OutOfRange, "pad_across_processes: dim " + std::to_string(asked) + " is outside [" +
                               std::to_string(-ndim) + ", " + std::to_string(ndim) + ")");
  }
  if (group == nullptr) return input;
  int64_t longest = 0;
  for (int64_t r = 0; r < calls->world(); ++r) longest = std::max(longest, calls->size(r, dim));
  if (input.size(dim) == longest) return input;
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes[dim] = longest;
  auto out = at::full(sizes, pad_value, input.options());
  const int64_t start = pad_first ? longest - input.size(dim) : 0;
  out.narrow(dim, start, input.size(dim)).copy_(input);
  return out;
}

}  // namespace accel::distributed
