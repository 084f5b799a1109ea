// The exception firewall every C entry point goes through: nothing thrown crosses the ABI; each failure
// becomes an ACCEL_ERR_* code and a thread-local message. Handles are checked to be live objects of the
// expected kind before they are used, so a NULL, freed or foreign pointer is an error, not a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "accel/common.h"
#include "core/error.hpp"
#include "core/lent_memory.hpp"

namespace accel::capi {

// Stores message as the calling thread's last error and returns code. Never throws.
int record_error(int code, const std::string& message) noexcept;

// Maps the exception being handled to a code and records "function: message". Call only from a catch
// block. Never throws (a message that cannot be built falls back to a static one).
int record_current_exception(const char* function) noexcept;

// The first member of every handle (ACCEL_HANDLE in shim/handles.hpp): a value unique to its kind while it
// lives, cleared when it is freed. First, so that checking a live handle of any other kind, however small,
// reads only that handle's own first word. volatile so that the clearing store in the destructor is not
// optimised away.
class HandleTag {
 public:
  HandleTag(const HandleTag&) = delete;
  HandleTag& operator=(const HandleTag&) = delete;
  bool is(uint64_t kind) const noexcept { return word_ == kind; }

 protected:
  explicit HandleTag(uint64_t kind) noexcept : word_(kind) {}
  ~HandleTag() { word_ = 0; }

 private:
  volatile uint64_t word_;
};

// The tag of one kind, default-constructible so that a handle is brace-initialised as `{{}, members...}`.
template <uint64_t Kind>
class KindTag final : public HandleTag {
 public:
  KindTag() noexcept : HandleTag(Kind) {}
};

// FNV-1a of the handle's C type name: a per-kind tag value that is stable and unlikely in garbage.
constexpr uint64_t handle_kind(const char* name) {
  uint64_t hash = 14695981039346656037ull;
  for (; *name != '\0'; ++name) hash = (hash ^ static_cast<unsigned char>(*name)) * 1099511628211ull;
  return hash;
}

template <class T, class = void>
struct is_handle : std::false_type {};
template <class T>
struct is_handle<T, std::void_t<decltype(T::kName)>> : std::true_type {};

// Throws Error(NullArgument) naming the argument when pointer is NULL.
inline void require(const void* pointer, const char* name) {
  if (pointer == nullptr) fail(Code::NullArgument, std::string("argument '") + name + "' is NULL");
}

// Whether the first word at handle is the tag of Handle's kind. Reads nothing past that word, so a pointer to
// a live handle of another kind (every handle starts with its tag) is refused without reading past it.
template <class Handle>
bool has_tag_of(const Handle* handle) noexcept {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
  static_assert(offsetof(Handle, tag) == 0, "ACCEL_HANDLE must be the first member of every handle");
#pragma GCC diagnostic pop
  return reinterpret_cast<const HandleTag*>(handle)->is(Handle::kKind);
}

// For handles: also Error(InvalidArgument) when the pointer is not a live handle of this kind.
template <class Handle, std::enable_if_t<is_handle<Handle>::value, int> = 0>
void require(const Handle* handle, const char* name) {
  require(static_cast<const void*>(handle), name);
  if (!has_tag_of(handle)) {
    fail(Code::InvalidArgument, std::string("argument '") + name + "' is not a live " + Handle::kName +
                                    " (freed, or not made by accel)");
  }
}

// A C boolean argument: 0 or 1. Anything else (5, -1) is more likely a wrong argument than a request, so
// Error(InvalidArgument) names it.
inline bool flag(int value, const char* name) {
  if (value != 0 && value != 1) {
    fail(Code::InvalidArgument, std::string("argument '") + name + "' is " + std::to_string(value) + ", not 0 or 1");
  }
  return value == 1;
}

template <class Handle>
bool is_live(const Handle* handle) noexcept {
  return handle != nullptr && has_tag_of(handle);
}

template <class Body>
int guarded(const char* function, Body&& body) noexcept {
  const CallerThread caller;
  try {
    body();
    return ACCEL_OK;
  } catch (...) {
    return record_current_exception(function);
  }
}

// For functions with an out-parameter: it is NULL unless the call succeeds.
template <class T, class Body>
int guarded_out(const char* function, T** out, Body&& body) noexcept {
  if (out != nullptr) *out = nullptr;
  return guarded(function, [&] {
    require(static_cast<const void*>(out), "out");
    body();
  });
}

// For accessors that return their value directly: a failure (a NULL or dead handle included) records
// the error and returns fallback.
template <class Value, class Body>
Value guarded_value(const char* function, Value fallback, Body&& body) noexcept {
  const CallerThread caller;
  try {
    return body();
  } catch (...) {
    record_current_exception(function);
    return fallback;
  }
}

// For accessors of one handle: read(*handle), or fallback when the handle is NULL or dead.
template <class Value, class Handle, class Read>
Value read_handle(const char* function, const Handle* handle, Value fallback, Read&& read) noexcept {
  return guarded_value<Value>(function, fallback, [&] {
    require(handle, "handle");
    return static_cast<Value>(read(*handle));
  });
}

// What every *_free does: NULL is a no-op; a pointer that is not a live handle of this kind is left
// alone (and reported through accel_error_last) rather than freed twice.
template <class Handle>
void release(const char* function, Handle* handle) noexcept {
  if (handle == nullptr) return;
  if (!is_live(handle)) {
    guarded(function, [&] { require(handle, "handle"); });
    return;
  }
  const CallerThread caller;
  try {
    delete handle;
  } catch (...) {
    record_current_exception(function);
  }
}

}  // namespace accel::capi
