// The C ABI seen from a consumer: tensors and DLPack, errors, bad input, one-process state and collectives.
#include <ATen/dlpack.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "accel.h"

namespace {

// A DLPack tensor owned by the test, with a deleter that records that it ran.
struct Producer {
  std::vector<float> data;
  std::vector<int64_t> shape;
  DLManagedTensor managed{};
  int* deleted = nullptr;
};

DLManagedTensor* make_dlpack(std::vector<float> data, std::vector<int64_t> shape, int* deleted) {
  auto* producer = new Producer{std::move(data), std::move(shape), {}, deleted};
  auto& dl = producer->managed.dl_tensor;
  dl.data = producer->data.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(producer->shape.size());
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = producer->shape.data();
  dl.strides = nullptr;
  dl.byte_offset = 0;
  producer->managed.manager_ctx = producer;
  producer->managed.deleter = [](DLManagedTensor* self) {
    auto* owner = static_cast<Producer*>(self->manager_ctx);
    if (owner->deleted) ++*owner->deleted;
    delete owner;
  };
  return &producer->managed;
}

std::string last_error() { return accel_error_last(); }

TEST(Tensor, FromDlpackSharesMemoryAndRunsTheDeleterOnce) {
  int deleted = 0;
  DLManagedTensor* managed = make_dlpack({1, 2, 3, 4, 5, 6}, {2, 3}, &deleted);
  void* producer_data = managed->dl_tensor.data;
  accel_tensor_t* tensor = nullptr;
  ASSERT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_OK) << last_error();
  void* data = nullptr;
  ASSERT_EQ(accel_tensor_data(tensor, &data), ACCEL_OK);
  EXPECT_EQ(data, producer_data);
  ASSERT_EQ(accel_tensor_ndim(tensor), 2u);
  EXPECT_EQ(accel_tensor_shape(tensor)[0], 2);
  EXPECT_EQ(accel_tensor_shape(tensor)[1], 3);
  EXPECT_EQ(accel_tensor_numel(tensor), 6);
  EXPECT_EQ(accel_tensor_dtype(tensor), ACCEL_DTYPE_FLOAT32);
  EXPECT_EQ(accel_tensor_element_size(tensor), 4u);
  EXPECT_STREQ(accel_tensor_device(tensor), "cpu");
  EXPECT_EQ(deleted, 0);
  accel_tensor_free(tensor);
  EXPECT_EQ(deleted, 1);
}

TEST(Tensor, ToDlpackSharesMemoryAndOutlivesTheHandle) {
  const int32_t values[] = {7, 8, 9};
  const int64_t shape[] = {3};
  accel_tensor_t* tensor = nullptr;
  ASSERT_EQ(accel_tensor_from_buffer(&tensor, values, ACCEL_DTYPE_INT32, shape, 1), ACCEL_OK) << last_error();
  void* data = nullptr;
  ASSERT_EQ(accel_tensor_data(tensor, &data), ACCEL_OK);
  EXPECT_NE(data, static_cast<const void*>(values));
  DLManagedTensor* exported = nullptr;
  ASSERT_EQ(accel_tensor_to_dlpack(&exported, tensor), ACCEL_OK) << last_error();
  EXPECT_EQ(exported->dl_tensor.data, data);
  EXPECT_EQ(exported->dl_tensor.dtype.code, kDLInt);
  EXPECT_EQ(exported->dl_tensor.dtype.bits, 32);
  accel_tensor_free(tensor);
  EXPECT_EQ(static_cast<int32_t*>(exported->dl_tensor.data)[2], 9);
  exported->deleter(exported);
}

TEST(Tensor, DlpackRoundTripKeepsThePointer) {
  int deleted = 0;
  DLManagedTensor* managed = make_dlpack({1, 2}, {2}, &deleted);
  void* producer_data = managed->dl_tensor.data;
  accel_tensor_t* first = nullptr;
  ASSERT_EQ(accel_tensor_from_dlpack(&first, managed), ACCEL_OK);
  DLManagedTensor* exported = nullptr;
  ASSERT_EQ(accel_tensor_to_dlpack(&exported, first), ACCEL_OK);
  accel_tensor_free(first);
  accel_tensor_t* second = nullptr;
  ASSERT_EQ(accel_tensor_from_dlpack(&second, exported), ACCEL_OK);
  void* data = nullptr;
  ASSERT_EQ(accel_tensor_data(second, &data), ACCEL_OK);
  EXPECT_EQ(data, producer_data);
  EXPECT_EQ(deleted, 0);
  accel_tensor_free(second);
  EXPECT_EQ(deleted, 1);
}

TEST(Tensor, CopyToBufferChecksCapacity) {
  const double values[] = {1.5, 2.5};
  const int64_t shape[] = {2};
  accel_tensor_t* tensor = nullptr;
  ASSERT_EQ(accel_tensor_from_buffer(&tensor, values, ACCEL_DTYPE_FLOAT64, shape, 1), ACCEL_OK);
  double out[2] = {0, 0};
  EXPECT_EQ(accel_tensor_copy_to_buffer(tensor, out, sizeof(double)), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("needs 16"), std::string::npos) << last_error();
  ASSERT_EQ(accel_tensor_copy_to_buffer(tensor, out, sizeof out), ACCEL_OK);
  EXPECT_EQ(out[1], 2.5);
  accel_tensor_free(tensor);
}

TEST(BadInput, MalformedDlpackIsRefusedAndOwnershipStaysWithTheCaller) {
  int deleted = 0;
  DLManagedTensor* managed = make_dlpack({1, 2}, {2}, &deleted);
  accel_tensor_t* tensor = reinterpret_cast<accel_tensor_t*>(0x1);
  managed->dl_tensor.dtype = {kDLFloat, 24, 1};
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_DTYPE);
  EXPECT_EQ(tensor, nullptr);
  EXPECT_NE(last_error().find("bits 24"), std::string::npos) << last_error();
  managed->dl_tensor.dtype = {kDLFloat, 32, 1};
  managed->dl_tensor.ndim = -1;
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_INVALID_ARGUMENT);
  managed->dl_tensor.ndim = 1;
  managed->dl_tensor.data = nullptr;
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("NULL data"), std::string::npos) << last_error();
  managed->dl_tensor.data = static_cast<Producer*>(managed->manager_ctx)->data.data();
  managed->dl_tensor.device = {kDLOpenCL, 0};
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_UNSUPPORTED);
  // A device type outside the enum, as a C caller may write it (stored as bytes: C++ may not form it).
  const int32_t unknown_device = 1000;
  static_assert(sizeof unknown_device == sizeof managed->dl_tensor.device.device_type);
  std::memcpy(&managed->dl_tensor.device.device_type, &unknown_device, sizeof unknown_device);
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("DLPack device type 1000 is not supported"), std::string::npos) << last_error();
  EXPECT_EQ(deleted, 0);
  managed->deleter(managed);
  EXPECT_EQ(deleted, 1);
}

// LibTorch computes a wrapped tensor's storage size in noexcept code: each of these layouts used to
// terminate the process instead of failing the call.
TEST(BadInput, DlpackLayoutsLibTorchCannotHoldAreRefused) {
  int deleted = 0;
  DLManagedTensor* managed = make_dlpack({1, 2, 3, 4, 5, 6}, {2, 3}, &deleted);
  DLTensor& dl = managed->dl_tensor;
  accel_tensor_t* tensor = nullptr;

  int64_t negative_strides[] = {-1, 1};
  dl.strides = negative_strides;
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("DLPack tensor: stride -1 in dim 0 is negative"), std::string::npos) << last_error();

  int64_t far_strides[] = {int64_t{1} << 62, 1};
  dl.strides = far_strides;
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("overflow int64"), std::string::npos) << last_error();

  int64_t huge_shape[] = {int64_t{1} << 62, int64_t{1} << 62};
  dl.strides = nullptr;
  dl.shape = huge_shape;
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("size of shape [4611686018427387904, 4611686018427387904] overflows"), std::string::npos)
      << last_error();

  dl.shape = static_cast<Producer*>(managed->manager_ctx)->shape.data();
  dl.byte_offset = UINT64_MAX - 8;
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("byte_offset"), std::string::npos) << last_error();

  EXPECT_EQ(tensor, nullptr);
  EXPECT_EQ(deleted, 0);
  dl.byte_offset = 0;
  ASSERT_EQ(accel_tensor_from_dlpack(&tensor, managed), ACCEL_OK) << last_error();  // the struct itself was fine
  accel_tensor_free(tensor);
  EXPECT_EQ(deleted, 1);
}

TEST(BadInput, NullHandlesAndOutParameters) {
  accel_tensor_t* tensor = nullptr;
  EXPECT_EQ(accel_tensor_from_dlpack(&tensor, nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_NE(last_error().find("accel_tensor_from_dlpack"), std::string::npos);
  EXPECT_NE(last_error().find("'managed'"), std::string::npos);
  EXPECT_EQ(accel_tensor_to_dlpack(nullptr, nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_options_new(nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_new(nullptr, nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_wait_for_everyone(nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_shutdown(nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_gather(nullptr, nullptr, &tensor), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_reduce(nullptr, nullptr, "sum", &tensor), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_state_broadcast(nullptr, nullptr, 0), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_tensor_copy_to_buffer(nullptr, nullptr, 0), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_tensor_ndim(nullptr), 0u);
  EXPECT_EQ(accel_tensor_shape(nullptr), nullptr);
  EXPECT_STREQ(accel_tensor_device(nullptr), "");
  EXPECT_EQ(accel_state_num_processes(nullptr), 0);
  EXPECT_STREQ(accel_state_device(nullptr), "");
  accel_tensor_free(nullptr);
  accel_state_free(nullptr);
  accel_options_free(nullptr);
  accel_bytes_list_free(nullptr);
}

TEST(BadInput, BufferArguments) {
  const int64_t shape[] = {2, -1};
  accel_tensor_t* tensor = nullptr;
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, nullptr, 99, shape, 1), ACCEL_ERR_DTYPE);
  EXPECT_NE(last_error().find("99"), std::string::npos);
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, nullptr, ACCEL_DTYPE_FLOAT32, shape, 2), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, nullptr, ACCEL_DTYPE_FLOAT32, shape, 1), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, nullptr, ACCEL_DTYPE_FLOAT32, nullptr, 1), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(tensor, nullptr);
}

TEST(BadInput, BufferSizesThatOverflowOrCannotBeAllocated) {
  const float value = 1.0f;
  accel_tensor_t* tensor = nullptr;
  const int64_t overflowing[] = {int64_t{1} << 62, int64_t{1} << 62};
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, &value, ACCEL_DTYPE_FLOAT32, overflowing, 2), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("overflows"), std::string::npos) << last_error();
  const int64_t bytes_overflow[] = {int64_t{1} << 62};  // elements fit in int64, their 2^64 bytes do not
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, &value, ACCEL_DTYPE_FLOAT32, bytes_overflow, 1), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("overflow int64"), std::string::npos) << last_error();
  // 2^50 bytes: a valid size, but more than any address space holds, so the allocator fails.
  const int64_t petabyte[] = {int64_t{1} << 48};
  EXPECT_EQ(accel_tensor_from_buffer(&tensor, &value, ACCEL_DTYPE_FLOAT32, petabyte, 1), ACCEL_ERR_OUT_OF_MEMORY);
  EXPECT_NE(last_error().find("cannot allocate the 1125899906842624 bytes"), std::string::npos) << last_error();
  EXPECT_EQ(last_error().find("frame #"), std::string::npos) << last_error();
  EXPECT_EQ(tensor, nullptr);
}

TEST(Options, CApiErrorsNameTheKeyAndValue) {
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  EXPECT_EQ(accel_options_set_bool(options, "no_such_key", 1), ACCEL_ERR_UNKNOWN_OPTION);
  EXPECT_NE(last_error().find("no_such_key"), std::string::npos);
  EXPECT_EQ(accel_options_set_string(options, "mixed_precision", "fp32"), ACCEL_ERR_BAD_OPTION_VALUE);
  EXPECT_NE(last_error().find("fp32"), std::string::npos);
  EXPECT_EQ(accel_options_set_string(options, "use_cpu", "true"), ACCEL_ERR_BAD_OPTION_VALUE);
  EXPECT_EQ(accel_options_set_string(options, "device", nullptr), ACCEL_ERR_NULL_ARGUMENT);
  EXPECT_EQ(accel_options_set(options, "timeout_s", "-3"), ACCEL_ERR_BAD_OPTION_VALUE);
  EXPECT_EQ(accel_options_set(nullptr, "timeout_s", "3"), ACCEL_ERR_NULL_ARGUMENT);
  ASSERT_EQ(accel_options_set(options, "timeout_s", "3"), ACCEL_OK);
  ASSERT_EQ(accel_options_set_int(options, "timeout_s", 4), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(options, "timeout_s", 5.5), ACCEL_OK);
  char* dump = nullptr;
  ASSERT_EQ(accel_options_dump(options, &dump), ACCEL_OK);
  EXPECT_NE(std::string(dump).find("timeout_s=5.5 (set)"), std::string::npos) << dump;
  accel_string_free(dump);
  accel_options_free(options);
}

TEST(Errors, NamesAndVersion) {
  EXPECT_STREQ(accel_error_name(ACCEL_ERR_TIMEOUT), "ACCEL_ERR_TIMEOUT");
  EXPECT_STREQ(accel_error_name(12345), "ACCEL_ERR_UNKNOWN_CODE");
  EXPECT_EQ(accel_version_major(), ACCEL_VERSION_MAJOR);
  EXPECT_STREQ(accel_version_string(), ACCEL_VERSION_STRING);
  EXPECT_EQ(std::string(ACCEL_VERSION_STRING), std::to_string(ACCEL_VERSION_MAJOR) + "." +
                                                   std::to_string(ACCEL_VERSION_MINOR) + "." +
                                                   std::to_string(ACCEL_VERSION_PATCH));
  EXPECT_EQ(accel_version_has_feature("gloo"), 1);
  EXPECT_EQ(accel_version_has_feature("mpi"), 0);
  EXPECT_EQ(accel_version_has_feature(nullptr), 0);
  EXPECT_NE(std::string(accel_version_features()).find("gloo"), std::string::npos);
  EXPECT_EQ(std::string(accel_version_torch()).rfind("1.", 0) == 0 || std::string(accel_version_torch()).rfind("2.", 0) == 0, true);
}

TEST(State, OneProcessWorksLocallyAndSharesItsState) {
  accel_state_t* first = nullptr;
  ASSERT_EQ(accel_state_new(&first, nullptr), ACCEL_OK) << last_error();
  EXPECT_EQ(accel_state_num_processes(first), 1);
  EXPECT_EQ(accel_state_process_index(first), 0);
  EXPECT_EQ(accel_state_is_main_process(first), 1);
  EXPECT_EQ(accel_state_is_last_process(first), 1);
  EXPECT_EQ(accel_state_distributed_type(first), ACCEL_DISTRIBUTED_NO);
  EXPECT_STREQ(accel_state_device(first), "cpu");

  accel_options_t* conflicting = nullptr;
  ASSERT_EQ(accel_options_new(&conflicting), ACCEL_OK);
  ASSERT_EQ(accel_options_set_string(conflicting, "mixed_precision", "bf16"), ACCEL_OK);
  accel_state_t* second = nullptr;
  EXPECT_EQ(accel_state_new(&second, conflicting), ACCEL_ERR_INVALID_STATE);
  EXPECT_NE(last_error().find("mixed_precision"), std::string::npos) << last_error();
  accel_options_free(conflicting);
  // Every state setting is compared, not only the device ones.
  ASSERT_EQ(accel_options_new(&conflicting), ACCEL_OK);
  ASSERT_EQ(accel_options_set_bool(conflicting, "sync_each_batch", 1), ACCEL_OK);
  EXPECT_EQ(accel_state_new(&second, conflicting), ACCEL_ERR_INVALID_STATE);
  EXPECT_NE(last_error().find("sync_each_batch"), std::string::npos) << last_error();
  accel_options_free(conflicting);
  ASSERT_EQ(accel_state_new(&second, nullptr), ACCEL_OK);
  accel_state_free(first);

  const float values[] = {1, 2, 3};
  const int64_t shape[] = {3};
  accel_tensor_t *input = nullptr, *out = nullptr;
  ASSERT_EQ(accel_tensor_from_buffer(&input, values, ACCEL_DTYPE_FLOAT32, shape, 1), ACCEL_OK);
  ASSERT_EQ(accel_state_gather(second, input, &out), ACCEL_OK);
  EXPECT_EQ(accel_tensor_numel(out), 3);
  accel_tensor_free(out);
  EXPECT_EQ(accel_state_reduce(second, input, "product", &out), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'product'"), std::string::npos);
  EXPECT_EQ(accel_state_broadcast(second, input, 1), ACCEL_ERR_OUT_OF_RANGE);
  EXPECT_EQ(accel_state_pad_across_processes(second, input, 1, 0.0, 0, &out), ACCEL_ERR_OUT_OF_RANGE);
  ASSERT_EQ(accel_state_wait_for_everyone(second), ACCEL_OK);
  ASSERT_EQ(accel_state_shutdown(second), ACCEL_OK);
  EXPECT_EQ(accel_state_gather(second, input, &out), ACCEL_ERR_INVALID_STATE);
  EXPECT_EQ(accel_state_shutdown(second), ACCEL_OK);
  accel_tensor_free(input);
  accel_state_free(second);
}

// Accelerate's dynamo_backend has no LibTorch counterpart: anything but "no" is refused, saying why, whether
// or not the process already has a state.
TEST(State, ADynamoBackendIsRefusedWithTheReason) {
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_string(options, "dynamo_backend", "inductor"), ACCEL_OK);
  accel_state_t* state = nullptr;
  EXPECT_EQ(accel_state_new(&state, options), ACCEL_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("dynamo_backend 'inductor': LibTorch has no TorchDynamo"), std::string::npos) << last_error();
  EXPECT_EQ(state, nullptr);
  accel_state_t* existing = nullptr;
  ASSERT_EQ(accel_state_new(&existing, nullptr), ACCEL_OK) << last_error();
  EXPECT_EQ(accel_state_new(&state, options), ACCEL_ERR_UNSUPPORTED);
  accel_state_free(existing);
  accel_options_free(options);
}

TEST(State, MasterPortInUseIsAnIoError) {
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string port = std::to_string(ntohs(address.sin_port));
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", port.c_str(), 1);
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(options, "timeout_s", 10), ACCEL_OK);  // the bind fails at once
  accel_state_t* state = nullptr;
  EXPECT_EQ(accel_state_new(&state, options), ACCEL_ERR_IO) << last_error();
  EXPECT_NE(last_error().find("127.0.0.1:" + port), std::string::npos) << last_error();
  EXPECT_EQ(state, nullptr);
  accel_options_free(options);
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(name);
  close(holder);
}

TEST(State, MalformedLaunchVariableIsNamed) {
  setenv("WORLD_SIZE", "two", 1);
  accel_state_t* state = nullptr;
  EXPECT_EQ(accel_state_new(&state, nullptr), ACCEL_ERR_ENVIRONMENT);
  EXPECT_NE(last_error().find("WORLD_SIZE='two'"), std::string::npos) << last_error();
  unsetenv("WORLD_SIZE");
}

TEST(BadInput, FreedOrForeignHandlesAreRefusedNotFollowed) {
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  accel_options_free(options);
  // The freed block, taken again by the allocator and overwritten, as a dangling handle would find it.
  std::vector<unsigned char> garbage(4096, 0xA5);
  auto* foreign = reinterpret_cast<accel_options_t*>(garbage.data());
  EXPECT_EQ(accel_options_set_int(foreign, "batch_size", 2), ACCEL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not a live accel_options_t"), std::string::npos) << last_error();
  auto* state = reinterpret_cast<accel_state_t*>(garbage.data());
  EXPECT_EQ(accel_state_num_processes(state), 0);
  EXPECT_NE(last_error().find("not a live accel_state_t"), std::string::npos) << last_error();
  accel_state_free(state);  // left alone, not freed
  // A handle of another kind is refused too.
  accel_tensor_t* tensor = nullptr;
  const float value = 1;
  ASSERT_EQ(accel_tensor_from_buffer(&tensor, &value, ACCEL_DTYPE_FLOAT32, nullptr, 0), ACCEL_OK);
  EXPECT_EQ(accel_state_wait_for_everyone(reinterpret_cast<accel_state_t*>(tensor)), ACCEL_ERR_INVALID_ARGUMENT);
  accel_tensor_free(tensor);
}

TEST(Options, EachObjectTakesOnlyItsOwnKeys) {
  accel_options_t* options = nullptr;
  ASSERT_EQ(accel_options_new(&options), ACCEL_OK);
  ASSERT_EQ(accel_options_set_double(options, "lr", 0.1), ACCEL_OK);
  accel_state_t* state = nullptr;
  EXPECT_EQ(accel_state_new(&state, options), ACCEL_ERR_UNKNOWN_OPTION);
  EXPECT_NE(last_error().find("'lr' is not a setting of the state"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("optimizer (accel_optimizer_new)"), std::string::npos) << last_error();
  char* dump = nullptr;
  ASSERT_EQ(accel_options_dump(options, &dump), ACCEL_OK);
  EXPECT_NE(std::string(dump).find("# optimizer (accel_optimizer_new)\nlr=0.1 (set)"), std::string::npos) << dump;
  accel_string_free(dump);
  accel_options_free(options);
}

}  // namespace
