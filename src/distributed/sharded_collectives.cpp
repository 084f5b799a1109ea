#include "distributed/sharded_collectives.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "distributed/process_group.hpp"

namespace accel::distributed {

namespace {

// One rank's side of the call, as a row of int64 so that every rank's travels in one small all-gather.
constexpr int64_t kMaxDims = 64;
enum Field : int64_t { kInputDims, kInputType, kInputNumel, kOutputNumel, kOutputType, kOutputOnDevice, kSizes };
constexpr int64_t kRow = kSizes + kMaxDims;

at::Tensor describe(const at::Tensor& input, const at::Tensor& output) {
  auto row = at::zeros({kRow}, at::kLong);
  auto* field = row.data_ptr<int64_t>();
  field[kInputDims] = input.dim();
  field[kInputType] = static_cast<int64_t>(input.scalar_type());
  field[kInputNumel] = input.numel();
  field[kOutputNumel] = output.numel();
  field[kOutputType] = static_cast<int64_t>(output.scalar_type());
  field[kOutputOnDevice] = output.device() == input.device() ? 1 : 0;
  for (int64_t d = 0; d < std::min(input.dim(), kMaxDims); ++d) field[kSizes + d] = input.size(d);
  return row;
}

std::string type_name(int64_t type) { return c10::toString(static_cast<c10::ScalarType>(type)); }

std::string input_text(const int64_t* field) {
  if (field[kInputDims] > kMaxDims) return std::to_string(field[kInputDims]) + " dimensions";
  std::string text = "[";
  for (int64_t d = 0; d < field[kInputDims]; ++d) text += (d ? ", " : "") + std::to_string(field[kSizes + d]);
  return text + "] " + type_name(field[kInputType]);
}

// The output's element count that `what` needs, given the input's.
int64_t needed_numel(const char* what, int64_t input_numel, int64_t world) {
  return std::string(what) == "reduce_scatter" ? input_numel / world : input_numel * world;
}

// Checks rows[r] (process r's side; `first` its index in the job) and fails naming the process: the same
// verdict on every rank that reads the same rows.
void check_sides(const at::Tensor& rows, int64_t first, int64_t world, const char* what) {
  const int64_t count = rows.size(0);
  const int64_t* reference = rows[0].data_ptr<int64_t>();
  for (int64_t r = 1; r < count; ++r) {
    const int64_t* field = rows[r].data_ptr<int64_t>();
    if (!std::equal(field + kSizes, field + kRow, reference + kSizes) || field[kInputDims] != reference[kInputDims] ||
        field[kInputType] != reference[kInputType]) {
      std::string text = std::string(what) + ": the inputs' shapes or dtypes differ across processes:";
      for (int64_t q = 0; q < count; ++q) {
        text += "\n  - process " + std::to_string(q) + ": " + input_text(rows[q].data_ptr<int64_t>());
      }
      fail(Code::ShapeMismatch, text);
    }
  }
  for (int64_t r = 0; r < count; ++r) {
    const int64_t* field = rows[r].data_ptr<int64_t>();
    const std::string process = std::string(what) + ": process " + std::to_string(first + r) + "'s output";
    if (field[kOutputType] != field[kInputType]) {
      fail(Code::Dtype, process + " is " + type_name(field[kOutputType]) + ", its input " + type_name(field[kInputType]));
    }
    if (field[kOutputOnDevice] == 0) fail(Code::InvalidArgument, process + " is on another device than its input");
    const int64_t input_numel = field[kInputNumel];
    const bool divides = std::string(what) != "reduce_scatter" || input_numel % world == 0;
    if (!divides || field[kOutputNumel] != needed_numel(what, input_numel, world)) {
      std::string text = process + " has " + std::to_string(field[kOutputNumel]) + " elements, but ";
      text += divides ? "needs " + std::to_string(needed_numel(what, input_numel, world))
                      : "the input's " + std::to_string(input_numel) + " do not split into " + std::to_string(world);
      fail(Code::ShapeMismatch, text + " (its input has " + std::to_string(input_numel) + " elements; " +
                                    std::to_string(world) + (world == 1 ? " process)" : " processes)"));
    }
  }
}

// Every rank's side when the shapes are checked, else this rank's alone; then the verdict.
void check_shapes(State& state, ProcessGroup* group, const at::Tensor& input, const at::Tensor& output,
                  const char* what) {
  if (!input.defined() || !output.defined()) fail(Code::InvalidArgument, std::string(what) + ": a tensor is undefined");
  const auto mine = describe(input, output);
  const int64_t world = group != nullptr ? group->world_size() : 1;
  if (group == nullptr || !state.check_shapes()) {
    check_sides(mine.unsqueeze(0), group != nullptr ? group->rank() : 0, world, what);
    return;
  }
  // Bookkeeping travels on the backend's device (NCCL moves CUDA memory only).
  const at::Device device(state.backend() == "nccl" ? state.device() : "cpu");
  auto sent = mine.to(device);
  auto all = at::empty({world, kRow}, sent.options());
  std::vector<at::Tensor> rows;
  for (int64_t r = 0; r < world; ++r) rows.push_back(all[r]);
  group->allgather(rows, sent, what);
  check_sides(all.cpu(), 0, world, what);
}

// The output as the transport writes it: itself when contiguous, else a staging tensor copied in afterwards.
at::Tensor flat_output(const at::Tensor& output) {
  return output.is_contiguous() ? output.view({-1}) : at::empty({output.numel()}, output.options());
}

}  // namespace

void reduce_scatter(State& state, const at::Tensor& input, at::Tensor& output, const std::string& reduction) {
  const char* what = "reduce_scatter";
  if (reduction != "sum" && reduction != "mean") {
    fail(Code::InvalidArgument, "reduce_scatter: unknown reduction '" + reduction + "' (expected sum or mean)");
  }
  ProcessGroup* group = state.group(what);
  check_shapes(state, group, input, output, what);
  // After the exchange, which made sure that every rank's dtype is the same: every rank refuses alike.
  if (reduction == "mean" && !at::isFloatingType(input.scalar_type())) {
    fail(Code::Dtype, "reduce_scatter: 'mean' needs a floating-point tensor, got " +
                          std::string(c10::toString(input.scalar_type())));
  }
  if (group == nullptr) {
    output.copy_(input.reshape(output.sizes()));
    return;
  }
  auto flat = flat_output(output);
  group->transport().reduce_scatter(flat, input.contiguous().view({-1}), ReduceKind::Sum, what);
  if (reduction == "mean") flat.div_(group->world_size());
  if (!output.is_contiguous()) output.copy_(flat.view(output.sizes()));
}

void all_gather(State& state, const at::Tensor& input, at::Tensor& output) {
  const char* what = "all_gather";
  ProcessGroup* group = state.group(what);
  check_shapes(state, group, input, output, what);
  if (group == nullptr) {
    output.copy_(input.reshape(output.sizes()));
    return;
  }
  auto flat = flat_output(output);
  group->transport().all_gather(flat, input.contiguous().view({-1}), what);
  if (!output.is_contiguous()) output.copy_(flat.view(output.sizes()));
}

}  // namespace accel::distributed
