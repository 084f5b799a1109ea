// A training step recorded once as a CUDA graph and replayed: LibTorch's at::cuda::CUDAGraph behind an
// interface that builds without CUDA too (there, nothing can be captured and unavailable() says why).
// CUDA headers stay in step_graph.cpp.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace accel::train {

class StepGraph {
 public:
  // Why a step on `device` cannot be captured by this build, or nullopt when it can.
  static std::optional<std::string> unavailable(const c10::Device& device);

  explicit StepGraph(const c10::Device& device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Runs `body` eagerly on the stream captures use, after the work queued so far on the current stream
  // and before what is queued there next: the warm-up a capture needs (cuBLAS workspaces, the caching
  // allocator's blocks and state made on a first step belong to that stream).
  void warm_up(const std::function<void()>& body);
  // Records what `body` queues as the graph, replacing any earlier one; nothing runs until replay().
  // When body or the capture fails, the capture is undone (no graph, the allocator's private pool given
  // back) and the error propagates. Error(Unsupported) where unavailable().
  void capture(const std::function<void()>& body);
  // Queues the graph on the current stream. Error(InvalidState) before a capture.
  void replay();
  bool captured() const;
  // Drops the graph and the memory it holds.
  void reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel::train
