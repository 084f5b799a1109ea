#include "accel/options.h"

#include "core/options.hpp"
#include "shim/guard.hpp"
#include "shim/handles.hpp"

using accel::capi::guarded;
using accel::capi::guarded_out;
using accel::capi::require;

namespace {
template <class Value>
int set_option(const char* function, accel_options_t* options, const char* key, const Value& value) {
  return guarded(function, [&] {
    require(options, "options");
    require(key, "key");
    options->options.set(key, accel::OptionValue(value));
  });
}
}  // namespace

extern "C" int accel_options_new(accel_options_t** out) {
  return guarded_out(__func__, out, [&] { *out = new accel_options(); });
}

extern "C" void accel_options_free(accel_options_t* options) { delete options; }

extern "C" int accel_options_set_bool(accel_options_t* options, const char* key, int value) {
  return set_option(__func__, options, key, value != 0);
}

extern "C" int accel_options_set_int(accel_options_t* options, const char* key, int64_t value) {
  return set_option(__func__, options, key, value);
}

extern "C" int accel_options_set_double(accel_options_t* options, const char* key, double value) {
  return set_option(__func__, options, key, value);
}

extern "C" int accel_options_set_string(accel_options_t* options, const char* key, const char* value) {
  if (value == nullptr) return guarded(__func__, [] { require(nullptr, "value"); });
  return set_option(__func__, options, key, std::string(value));
}

extern "C" int accel_options_set(accel_options_t* options, const char* key, const char* value) {
  return guarded(__func__, [&] {
    require(options, "options");
    require(key, "key");
    require(value, "value");
    options->options.set_text(key, value);
  });
}

extern "C" int accel_options_dump(const accel_options_t* options, const char** out) {
  return guarded_out(__func__, out, [&] {
    require(options, "options");
    auto* mutable_options = const_cast<accel_options_t*>(options);
    mutable_options->dump = accel::resolve_options(&options->options, accel::process_env()).dump();
    *out = mutable_options->dump.c_str();
  });
}
