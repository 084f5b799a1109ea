#include "train/step/step_graph.hpp"

#include "core/error.hpp"

#ifdef ACCEL_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace accel::train {

#ifdef ACCEL_WITH_CUDA

namespace {

// `waiting` runs what is queued on it from now on after what `source` has queued so far.
void order_after(const c10::cuda::CUDAStream& waiting, const c10::cuda::CUDAStream& source) {
  at::cuda::CUDAEvent event;
  event.record(source);
  event.block(waiting);
}

}  // namespace

struct StepGraph::Impl {
  c10::Device device;
  c10::cuda::CUDAStream stream;  // warm-ups and captures run here, never on the caller's stream
  std::unique_ptr<at::cuda::CUDAGraph> graph;

  // Runs body on `stream`, ordered after and before the caller's current stream.
  template <typename Body>
  void on_own_stream(Body&& body) {
    const c10::cuda::CUDAGuard device_guard(device);
    const auto current = c10::cuda::getCurrentCUDAStream(device.index());
    order_after(stream, current);
    {
      const c10::cuda::CUDAStreamGuard stream_guard(stream);
      body();
    }
    order_after(current, stream);
  }

  // After a failed capture: ends it if it is still open, clears CUDA's record of its error (a broken
  // capture does not break the context) and gives back the private pool the allocator routed it to,
  // unless capture_end() already stopped routing (then CUDAGraph's reset gives the pool back).
  void abandon(at::cuda::CUDAGraph& failed) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream.stream(), &partial) == cudaSuccess && partial != nullptr) cudaGraphDestroy(partial);
    }
    (void)cudaGetLastError();
    bool routing_ended = false;
    try {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(device.index(), failed.pool());
      routing_ended = true;
    } catch (const c10::Error&) {
      // capture_end() got as far as ending the routing itself.
    }
    if (routing_ended) c10::cuda::CUDACachingAllocator::releasePool(device.index(), failed.pool());
  }
};

std::optional<std::string> StepGraph::unavailable(const c10::Device& device) {
  if (!device.is_cuda()) return "CUDA graphs need a CUDA device, and the state's device is " + device.str();
  return std::nullopt;
}

StepGraph::StepGraph(const c10::Device& device)
    : impl_(new Impl{device, c10::cuda::getStreamFromPool(false, device.index()), nullptr}) {}

StepGraph::~StepGraph() = default;

void StepGraph::warm_up(const std::function<void()>& body) { impl_->on_own_stream(body); }

void StepGraph::capture(const std::function<void()>& body) {
  reset();
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  impl_->on_own_stream([&] {
    // Thread-local mode: a loader's prefetch thread may copy to the device meanwhile; only this thread's
    // synchronising calls would break the capture (and fail, saying so).
    graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    try {
      body();
      graph->capture_end();
    } catch (...) {
      impl_->abandon(*graph);
      throw;
    }
  });
  impl_->graph = std::move(graph);
}

void StepGraph::replay() {
  if (!impl_->graph) fail(Code::InvalidState, "no CUDA graph has been captured");
  const c10::cuda::CUDAGuard device_guard(impl_->device);
  impl_->graph->replay();
}

bool StepGraph::captured() const { return impl_->graph != nullptr; }

void StepGraph::reset() { impl_->graph.reset(); }

#else

struct StepGraph::Impl {};

std::optional<std::string> StepGraph::unavailable(const c10::Device&) {
  return "CUDA graphs need CUDA, and this build of accel is against a LibTorch without it";
}

StepGraph::StepGraph(const c10::Device&) : impl_(new Impl) {}

StepGraph::~StepGraph() = default;

void StepGraph::warm_up(const std::function<void()>& body) { body(); }

void StepGraph::capture(const std::function<void()>&) { fail(Code::Unsupported, *unavailable(c10::Device("cpu"))); }

void StepGraph::replay() { fail(Code::InvalidState, "no CUDA graph has been captured"); }

bool StepGraph::captured() const { return false; }

void StepGraph::reset() {}

#endif

}  // namespace accel::train
