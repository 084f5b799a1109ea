#include "distributed/collectives/sharded_collectives.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "distributed/call_agreement.hpp"
#include "distributed/group/process_group.hpp"

namespace accel::distributed {

namespace {

std::string type_name(c10::ScalarType type) { return c10::toString(type); }

// The output's element count that `what` needs, given the input's.
int64_t needed_numel(const char* what, int64_t input_numel, int64_t world) {
  return std::string(what) == "reduce_scatter" ? input_numel / world : input_numel * world;
}

// One process's side (process `process` of the job, its call at `row` of calls): the verdict on its output.
void check_output(const Agreement& calls, int64_t row, int64_t process, int64_t world, const char* what) {
  const std::string side = std::string(what) + ": process " + std::to_string(process) + "'s output";
  if (calls.output_dtype(row) != calls.dtype(row)) {
    fail(Code::Dtype, side + " is " + type_name(calls.output_dtype(row)) + ", its input " + type_name(calls.dtype(row)));
  }
  if (!calls.output_on_input_device(row)) fail(Code::InvalidArgument, side + " is on another device than its input");
  const int64_t input_numel = calls.numel(row);
  const bool divides = std::string(what) != "reduce_scatter" || input_numel % world == 0;
  if (!divides || calls.output_numel(row) != needed_numel(what, input_numel, world)) {
    std::string text = side + " has " + std::to_string(calls.output_numel(row)) + " elements, but ";
    text += divides ? "needs " + std::to_string(needed_numel(what, input_numel, world))
                    : "the input's " + std::to_string(input_numel) + " do not split into " + std::to_string(world);
    fail(Code::ShapeMismatch, text + " (its input has " + std::to_string(input_numel) + " elements; " +
                                  std::to_string(world) + (world == 1 ? " process)" : " processes)"));
  }
}

// Every rank's side when the shapes are checked (the agreement), else this rank's alone; then the verdict.
void check_shapes(State& state, ProcessGroup* group, const Call& call, const char* what) {
  if (!call.input.defined() || !call.output.defined()) {
    fail(Code::InvalidArgument, std::string(what) + ": a tensor is undefined");
  }
  const int64_t world = group != nullptr ? group->world_size() : 1;
  if (group == nullptr || !state.check_shapes()) {
    // This rank's own side, described as the agreement would carry it, without sending it.
    const Agreement mine = describe_alone(call);
    check_output(mine, 0, group != nullptr ? group->rank() : 0, world, what);
    return;
  }
  const Agreement calls = agree(state, *group, call);
  for (int64_t r = 1; r < world; ++r) {
    if (!calls.same_input(0, r, /*skip_dim0=*/false)) {
      fail(Code::ShapeMismatch, calls.inputs_per_process(std::string(what) + ": the inputs' shapes or dtypes differ "
                                                                               "across processes:"));
    }
  }
  for (int64_t r = 0; r < world; ++r) check_output(calls, r, r, world, what);
}

// The output as the transport writes it: itself when contiguous, else a staging tensor copied in afterwards.
at::Tensor flat_output(const at::Tensor& output) {
  return output.is_contiguous() ? output.view({-1}) : at::empty({output.numel()}, output.options());
}

}  // namespace

void reduce_scatter(State& state, const at::Tensor& input, at::Tensor& output, const std::string& reduction) {
  const char* what = "reduce_scatter";
  ProcessGroup* group = state.group(what);
  Call call(CallKind::ReduceScatter, reduction);
  call.input = input;
  call.output = output;
  check_shapes(state, group, call, what);
  // After the exchange, which made sure that every rank's reduction and dtype are the same: every rank
  // refuses alike.
  if (reduction != "sum" && reduction != "mean") {
    fail(Code::InvalidArgument, "reduce_scatter: unknown reduction '" + reduction + "' (expected sum or mean)");
  }
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
  Call call(CallKind::AllGather);
  call.input = input;
  call.output = output;
  check_shapes(state, group, call, what);
  if (group == nullptr) {
    output.copy_(input.reshape(output.sizes()));
    return;
  }
  auto flat = flat_output(output);
  group->transport().all_gather(flat, input.contiguous().view({-1}), what);
  if (!output.is_contiguous()) output.copy_(flat.view(output.sizes()));
}

}  // namespace accel::distributed
