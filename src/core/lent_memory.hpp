// Memory a caller lent through DLPack is given back (its deleter called) only on a thread that is in a
// call into the library: a binding's deleter may enter its language's runtime (Python takes the GIL, Julia
// its GC lock), which a thread of the library's own (c10d's workers, the shared-memory thread) must not
// do. Python, for one, ends any thread that asks for the GIL while the interpreter shuts down, unwinding
// it through LibTorch destructors that cannot unwind: the process aborted when a Gloo worker dropped the
// last reference to an array a script had gathered just before it exited. A deleter reached on another
// thread waits in a queue that the next call into the library, on any thread, empties.
#pragma once

struct DLManagedTensor;

namespace accel {

// Marks the calling thread as in a call into the library for its lifetime (every C entry point makes one).
// The outermost one gives back what other threads queued, on entry and on exit. Never throws.
class CallerThread {
 public:
  CallerThread() noexcept;
  ~CallerThread();
  CallerThread(const CallerThread&) = delete;
  CallerThread& operator=(const CallerThread&) = delete;
};

// Runs managed's deleter now on a thread in a call into the library, else queues it for the next call.
void give_back(DLManagedTensor* managed) noexcept;

}  // namespace accel
