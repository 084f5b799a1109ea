#include "distributed/collectives.hpp"

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "core/error.hpp"

namespace accel::distributed {

namespace {

// Fixed-size description of a tensor, so that describing costs one all-gather of a small int64 tensor.
constexpr int64_t kMaxDims = 64;
constexpr int64_t kHeader = 2;  // ndim, dtype

std::string shape_text(const int64_t* row) {
  if (row[0] > kMaxDims) return std::to_string(row[0]) + " dimensions";
  std::string text = "[";
  for (int64_t d = 0; d < row[0]; ++d) text += (d ? ", " : "") + std::to_string(row[kHeader + d]);
  return text + "] " + c10::toString(static_cast<c10::ScalarType>(row[1]));
}

// Bookkeeping tensors travel on the backend's device (NCCL only moves CUDA memory) and are read on the CPU.
at::Device comm_device(const State& state) { return at::Device(state.backend() == "nccl" ? state.device() : "cpu"); }

// Each rank's (ndim, dtype, sizes...) as rows of one [P, kHeader + kMaxDims] CPU tensor. Every check
// of a shape happens after this exchange, on every rank alike: a rank that failed before it would leave
// the others waiting in it until the timeout.
at::Tensor all_shapes(State& state, ProcessGroup& group, const at::Tensor& tensor, const char* what) {
  auto mine = at::zeros({kHeader + kMaxDims}, at::kLong);
  auto* row = mine.data_ptr<int64_t>();
  row[0] = tensor.dim();
  row[1] = static_cast<int64_t>(tensor.scalar_type());
  for (int64_t d = 0; d < std::min(tensor.dim(), kMaxDims); ++d) row[kHeader + d] = tensor.size(d);
  mine = mine.to(comm_device(state));
  auto all = at::empty({group.world_size(), kHeader + kMaxDims}, mine.options());
  std::vector<at::Tensor> rows;
  for (int64_t r = 0; r < group.world_size(); ++r) rows.push_back(all[r]);
  group.allgather(rows, mine, what);
  all = all.cpu();
  for (int64_t r = 0; r < group.world_size(); ++r) {
    const int64_t ndim = all[r].data_ptr<int64_t>()[0];
    if (ndim > kMaxDims) {
      fail(Code::InvalidArgument, std::string(what) + ": process " + std::to_string(r) + "'s tensor has " +
                                      std::to_string(ndim) + " dimensions; at most 64 are supported");
    }
  }
  return all;
}

[[noreturn]] void shape_mismatch(const at::Tensor& shapes, const char* what, const std::string& why) {
  std::string text = std::string(what) + ": " + why + " across processes:";
  for (int64_t r = 0; r < shapes.size(0); ++r) {
    text += "\n  - process " + std::to_string(r) + ": " + shape_text(shapes[r].data_ptr<int64_t>());
  }
  fail(Code::ShapeMismatch, text);
}

// With check_shapes on, every rank learns every rank's shape and all fail together on a difference.
void check_same_shapes(State& state, ProcessGroup& group, const at::Tensor& tensor, const char* what) {
  if (!state.check_shapes()) return;
  auto shapes = all_shapes(state, group, tensor, what);
  for (int64_t r = 1; r < shapes.size(0); ++r) {
    if (!shapes[r].equal(shapes[0])) shape_mismatch(shapes, what, "shapes or dtypes differ");
  }
}

// Collectives work on CPU or the state's CUDA device; contiguous memory is what c10d sends.
at::Tensor communicable(const at::Tensor& tensor, const char* what) {
  if (!tensor.defined()) fail(Code::InvalidArgument, std::string(what) + ": the tensor is undefined");
  return tensor.dim() == 0 ? tensor.reshape({1}).contiguous() : tensor.contiguous();
}


// Views of `out` holding one dim-0 slice of `rows` rows per rank, for allgather to fill.
std::vector<at::Tensor> rank_slices(const at::Tensor& out, int64_t world, int64_t rows) {
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < world; ++r) parts.push_back(out.narrow(0, r * rows, rows));
  return parts;
}

// Every rank's dim-0 size, after checking that dtypes and the other dimensions agree (on every rank alike).
std::vector<int64_t> rows_per_rank(const at::Tensor& shapes, const char* what) {
  const int64_t* first = shapes[0].data_ptr<int64_t>();
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < shapes.size(0); ++r) {
    const int64_t* row = shapes[r].data_ptr<int64_t>();
    if (!std::equal(row, row + kHeader, first) || !std::equal(row + kHeader + 1, row + kHeader + kMaxDims, first + kHeader + 1)) {
      shape_mismatch(shapes, what, "dtypes or sizes beyond dim 0 differ");
    }
    rows.push_back(row[kHeader]);
  }
  return rows;
}

}  // namespace

// Accelerate's gather needs equal shapes; here each rank's rows are padded to the longest, gathered, and
// the padding cut out again, so ranks with fewer rows (an uneven last batch) need no pad_across_processes.
at::Tensor gather(State& state, const at::Tensor& input) {
  const char* what = "gather";
  auto tensor = communicable(input, what);
  ProcessGroup* group = state.group(what);
  if (group == nullptr) return tensor.clone();
  const std::vector<int64_t> rows = rows_per_rank(all_shapes(state, *group, tensor, what), what);
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

at::Tensor gather_for_metrics(State& state, const at::Tensor& input) {
  auto all = gather(state, input);
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
  const int64_t world = group->world_size();
  const at::Device device = comm_device(state);
  auto length = at::full({1}, static_cast<int64_t>(bytes.size()), at::TensorOptions(at::kLong).device(device));
  auto lengths = at::empty({world}, length.options());
  auto length_parts = rank_slices(lengths, world, 1);
  group->allgather(length_parts, length, what);
  lengths = lengths.cpu();
  const auto* all_lengths = lengths.data_ptr<int64_t>();
  const int64_t longest = std::max<int64_t>(1, *std::max_element(all_lengths, all_lengths + world));
  auto mine = at::zeros({longest}, at::kByte);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(mine.data_ptr<uint8_t>()));
  mine = mine.to(device);
  auto all = at::empty({world * longest}, mine.options());
  auto parts = rank_slices(all, world, longest);
  group->allgather(parts, mine, what);
  all = all.cpu();
  std::vector<std::string> result;
  const auto* base = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
  for (int64_t r = 0; r < world; ++r) result.emplace_back(base + r * longest, static_cast<size_t>(all_lengths[r]));
  return result;
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
  const at::Device device = comm_device(state);
  auto length = at::full({1}, static_cast<int64_t>(bytes.size()), at::TensorOptions(at::kLong).device(device));
  group->broadcast(length, from_process, what);
  const int64_t size = length.cpu().data_ptr<int64_t>()[0];
  if (size == 0) {
    bytes.clear();
    return;
  }
  auto payload = at::empty({size}, at::kByte);
  if (group->rank() == from_process) std::memcpy(payload.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  payload = payload.to(device);
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

}  // namespace

at::Tensor reduce(State& state, const at::Tensor& input, const std::string& reduction) {
  const char* what = "reduce";
  require_reduction(reduction);
  if (!input.defined()) fail(Code::InvalidArgument, "reduce: the tensor is undefined");
  require_reducible(input, reduction, "");
  auto out = input.clone(at::MemoryFormat::Contiguous);
  ProcessGroup* group = state.group(what);
  if (group == nullptr) return out;
  check_same_shapes(state, *group, out, what);
  group->transport().allreduce(out, reduction == "max" ? ReduceKind::Max : ReduceKind::Sum, what);
  if (reduction == "mean") out.div_(group->world_size());
  return out;
}

NamedTensors reduce(State& state, const NamedTensors& inputs, const std::string& reduction) {
  const char* what = "reduce";
  require_reduction(reduction);
  NamedTensors out;
  for (const auto& [name, tensor] : inputs) {
    if (!tensor.defined()) fail(Code::InvalidArgument, "reduce: '" + name + "' is undefined");
    add_field(out, name, tensor.clone(at::MemoryFormat::Contiguous));
  }
  ProcessGroup* group = state.group(what);
  if (group != nullptr && state.check_shapes()) {
    const auto described = gather_bytes(state, describe_leaves(out));
    if (std::any_of(described.begin(), described.end(), [&](const std::string& d) { return d != described[0]; })) {
      std::string text = "reduce: the named tensors' names, shapes or dtypes differ across processes:";
      for (size_t r = 0; r < described.size(); ++r) text += "\n  - process " + std::to_string(r) + ": " + described[r];
      fail(Code::ShapeMismatch, text);
    }
  }
  // After the exchange, so that every rank refuses alike.
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
    group->transport().allreduce(flat, reduction == "max" ? ReduceKind::Max : ReduceKind::Sum, what);
    if (reduction == "mean") flat.div_(group->world_size());
    int64_t offset = 0;
    for (auto* leaf : leaves) {
      leaf->copy_(flat.narrow(0, offset, leaf->numel()).view(leaf->sizes()));
      offset += leaf->numel();
    }
  }
  return out;
}

void broadcast(State& state, at::Tensor& tensor, int32_t from_process) {
  const char* what = "broadcast";
  if (!tensor.defined()) fail(Code::InvalidArgument, "broadcast: the tensor is undefined");
  const int32_t world = state.launch().world_size;
  if (from_process < 0 || from_process >= world) {
    fail(Code::OutOfRange, "broadcast: from_process " + std::to_string(from_process) + " is outside [0, " +
                               std::to_string(world) + ")");
  }
  ProcessGroup* group = state.group(what);
  if (group == nullptr) return;
  check_same_shapes(state, *group, tensor, what);
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
  ProcessGroup* group = state.group(what);
  // Shapes first, dim after: with the same number of dimensions everywhere, a bad dim fails on every rank.
  at::Tensor shapes = group != nullptr ? all_shapes(state, *group, input, what) : at::Tensor();
  for (int64_t r = 0; shapes.defined() && r < shapes.size(0); ++r) {
    if (shapes[r].data_ptr<int64_t>()[0] != ndim) shape_mismatch(shapes, what, "the number of dimensions differs");
  }
  if (dim < -ndim || dim >= ndim) {
    fail(Code::OutOfRange, "pad_across_processes: dim " + std::to_string(dim) + " is outside [" +
                               std::to_string(-ndim) + ", " + std::to_string(ndim) + ")");
  }
  if (dim < 0) dim += ndim;
  if (group == nullptr) return input;
  int64_t longest = 0;
  for (int64_t r = 0; r < shapes.size(0); ++r) longest = std::max(longest, shapes[r].data_ptr<int64_t>()[kHeader + dim]);
  if (input.size(dim) == longest) return input;
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes[dim] = longest;
  auto out = at::full(sizes, pad_value, input.options());
  const int64_t start = pad_first ? longest - input.size(dim) : 0;
  out.narrow(dim, start, input.size(dim)).copy_(input);
  return out;
}

}  // namespace accel::distributed
