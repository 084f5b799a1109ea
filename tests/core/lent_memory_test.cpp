// A DLPack producer's deleter runs only on a thread in a call into the library: dropped by a thread of the
// library's own, the memory waits for the next call (see core/lent_memory.hpp).
#include "core/lent_memory.hpp"

#include <ATen/dlpack.h>
#include <gtest/gtest.h>

#include <thread>
#include <utility>

#include "core/tensor.hpp"

namespace accel {
namespace {

struct Lent {
  float values[3] = {1, 2, 3};
  int64_t shape[1] = {3};
  DLManagedTensor managed{};
  int deleted = 0;
  std::thread::id deleted_on;

  Lent() {
    managed.dl_tensor.data = values;
    managed.dl_tensor.device = {kDLCPU, 0};
    managed.dl_tensor.ndim = 1;
    managed.dl_tensor.dtype = {kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      auto* lent = static_cast<Lent*>(self->manager_ctx);
      ++lent->deleted;
      lent->deleted_on = std::this_thread::get_id();
    };
  }
};

TEST(LentMemory, DroppedInACallTheMemoryIsGivenBackAtOnce) {
  Lent lent;
  {
    const CallerThread caller;
    at::Tensor tensor = tensor_from_dlpack(&lent.managed);
    tensor.reset();
    EXPECT_EQ(lent.deleted, 1);
  }
  EXPECT_EQ(lent.deleted_on, std::this_thread::get_id());
}

TEST(LentMemory, DroppedOnALibraryThreadTheMemoryWaitsForTheNextCallOnACallerThread) {
  Lent lent;
  at::Tensor tensor;
  {
    const CallerThread caller;
    tensor = tensor_from_dlpack(&lent.managed);
  }
  std::thread library_thread([held = std::move(tensor)]() mutable { held.reset(); });
  library_thread.join();
  EXPECT_EQ(lent.deleted, 0) << "the deleter ran on a thread that was not in a call into the library";
  {
    const CallerThread next_call;
    EXPECT_EQ(lent.deleted, 1);
  }
  EXPECT_EQ(lent.deleted, 1);
  EXPECT_EQ(lent.deleted_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace accel
