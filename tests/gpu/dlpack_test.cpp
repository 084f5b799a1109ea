// DLPack exchange of CUDA tensors through the C ABI: zero-copy both ways, the device carried, the memory
// kept alive by whoever holds it, and work ordered by the current CUDA stream.
//
// What "the stream is respected" means for a C ABI: the DLPack C struct carries no stream (the stream
// handshake is Python's __dlpack__(stream=...), which a C caller does not have), and accel never syncs
// the device or switches streams behind its caller. Like LibTorch itself, it enqueues its work on the
// calling thread's current stream. So work a producer enqueued on that stream before the exchange is
// ordered before accel's use of the memory, and accel's work before a consumer's later use on the same
// stream, without a host synchronisation; a consumer on another stream must synchronise itself.
//
// Only device-generic c10 stream classes are used, so that this file builds against a CPU-only LibTorch.
#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "accel.h"
#include "cuda_present.hpp"

namespace {

std::string last_error() { return accel_error_last(); }

std::vector<float> host_values(const accel_tensor_t* tensor) {
  std::vector<float> values(static_cast<size_t>(accel_tensor_numel(tensor)));
  EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, values.data(), values.size() * sizeof(float)), ACCEL_OK) << last_error();
  return values;
}

at::TensorOptions cuda_floats() { return at::TensorOptions(at::kFloat).device(at::Device(at::kCUDA, 0)); }

accel_tensor_t* imported(const at::Tensor& tensor) {
  accel_tensor_t* handle = nullptr;
  EXPECT_EQ(accel_tensor_from_dlpack(&handle, at::toDLPack(tensor)), ACCEL_OK) << last_error();
  return handle;
}

TEST(GpuDlpack, CudaTensorsCrossWithoutACopyBothWays) {
  SKIP_WITHOUT_CUDA();
  const auto expected = at::arange(12, cuda_floats()).reshape({3, 4});
  const auto source = expected.clone();
  void* const source_data = source.data_ptr();

  accel_tensor_t* handle = imported(source);
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(std::string(accel_tensor_device(handle)), "cuda:" + std::to_string(source.device().index()));
  ASSERT_EQ(accel_tensor_ndim(handle), 2u);
  EXPECT_EQ(accel_tensor_shape(handle)[0], 3);
  EXPECT_EQ(accel_tensor_shape(handle)[1], 4);
  EXPECT_EQ(accel_tensor_dtype(handle), ACCEL_DTYPE_FLOAT32);
  EXPECT_EQ(host_values(handle), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  void* host_pointer = nullptr;
  EXPECT_EQ(accel_tensor_data(handle, &host_pointer), ACCEL_ERR_INVALID_ARGUMENT) << "a device pointer is not host memory";

  DLManagedTensor* exported = nullptr;
  ASSERT_EQ(accel_tensor_to_dlpack(&exported, handle), ACCEL_OK) << last_error();
  accel_tensor_free(handle);  // the export keeps the memory alive on its own
  EXPECT_EQ(exported->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(exported->dl_tensor.device.device_id, source.device().index());
  EXPECT_EQ(static_cast<char*>(exported->dl_tensor.data) + exported->dl_tensor.byte_offset, source_data);

  const at::Tensor back = at::fromDLPack(exported);  // takes ownership of the export
  EXPECT_TRUE(back.is_cuda());
  EXPECT_EQ(back.data_ptr(), source_data);
  back.mul_(2);  // a write at the end of the round trip is a write into the source
  EXPECT_TRUE(source.equal(expected * 2));
}

// The caching allocator hands a freed block to the next allocation of its size at once: if the handle
// did not keep the producer's memory alive, the filler below would overwrite what accel reads.
TEST(GpuDlpack, TheHandleKeepsCudaMemoryAliveAfterTheProducerLetsGo) {
  SKIP_WITHOUT_CUDA();
  auto source = at::full({256}, 3.0f, cuda_floats());
  accel_tensor_t* handle = imported(source);
  source = at::Tensor();
  const auto filler = at::full({256}, -1.0f, cuda_floats());
  EXPECT_EQ(host_values(handle), std::vector<float>(256, 3.0f));
  accel_tensor_free(handle);
}

// Holds the current stream busy for tens of milliseconds (two fp32 8192^3 matmuls), so that anything
// enqueued after it on that stream is still pending when the host goes on.
void occupy(const at::Tensor& square) { at::mm(at::mm(square, square), square); }

TEST(GpuDlpack, WorkOnTheCurrentStreamIsOrderedAcrossTheExchange) {
  SKIP_WITHOUT_CUDA();
  accel_state_t* state = nullptr;
  ASSERT_EQ(accel_state_new(&state, nullptr), ACCEL_OK) << last_error();
  ASSERT_STREQ(accel_state_device(state), "cuda:0");
  const c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  // A side stream, not the default one: pool streams do not synchronise implicitly with the legacy
  // default stream, so a read issued anywhere else than on this stream could overtake the writes.
  const c10::Stream side = cuda.getStreamFromGlobalPool(at::Device(at::kCUDA, 0));
  const c10::StreamGuard on_side(side);
  const auto square = at::randn({8192, 8192}, cuda_floats());

  // Producer (LibTorch) -> accel: the fill is still queued behind the matmuls when accel reads.
  auto produced = at::zeros({1024}, cuda_floats());
  side.synchronize();
  occupy(square);
  produced.fill_(7.0f);
  accel_tensor_t* handle = imported(produced);
  EXPECT_FALSE(side.query()) << "the stream drained before the exchange: the test would prove nothing";
  EXPECT_EQ(host_values(handle), std::vector<float>(1024, 7.0f));
  accel_tensor_free(handle);

  // accel -> consumer (LibTorch): with one process, gather is a copy that accel enqueues itself.
  auto source = at::zeros({1024}, cuda_floats());
  side.synchronize();
  occupy(square);
  source.fill_(9.0f);
  handle = imported(source);
  accel_tensor_t* gathered = nullptr;
  ASSERT_EQ(accel_state_gather(state, handle, &gathered), ACCEL_OK) << last_error();
  DLManagedTensor* exported = nullptr;
  ASSERT_EQ(accel_tensor_to_dlpack(&exported, gathered), ACCEL_OK) << last_error();
  EXPECT_FALSE(side.query()) << "the stream drained before the exchange: the test would prove nothing";
  const at::Tensor consumed = at::fromDLPack(exported);
  EXPECT_NE(consumed.data_ptr(), source.data_ptr());
  EXPECT_TRUE(consumed.cpu().equal(at::full({1024}, 9.0f)));
  accel_tensor_free(gathered);
  accel_tensor_free(handle);
  accel_state_free(state);
}

}  // namespace
