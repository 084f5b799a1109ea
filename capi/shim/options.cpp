#include "accel/options.h"

#include <cstdlib>
#include <cstring>

#include "data/loader_options.hpp"
#include "distributed/state_options.hpp"
#include "shim/entry_point.hpp"
#include "tracking/trackers.hpp"
#include "train/training_options.hpp"

namespace {

// Every object an options object may carry settings for; each area owns its keys.
const accel::OptionCatalog& option_catalog() {
  static const accel::OptionCatalog catalog{
      &accel::distributed::state_option_scope(), &accel::data::loader_option_scope(),
      &accel::train::prepare_option_scope(),     &accel::train::optimizer_option_scope(),
      &accel::train::scheduler_option_scope(),   &accel::train::loss_option_scope(),
      &accel::train::train_step_option_scope(),  &accel::tracking::trackers_option_scope(),
  };
  return catalog;
}

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
  return guarded_out(__func__, out, [&] { *out = new accel_options{{}, accel::Options(option_catalog())}; });
}

extern "C" void accel_options_free(accel_options_t* options) { release(__func__, options); }

extern "C" int accel_options_set_bool(accel_options_t* options, const char* key, int value) {
  return guarded(__func__, [&] {
    require(options, "options");
    require(key, "key");
    if (value != 0 && value != 1) {
      accel::fail(accel::Code::BadOptionValue,
                  std::string("option '") + key + "': a boolean is 0 or 1, got " + std::to_string(value));
    }
    options->options.set(key, accel::OptionValue(value == 1));
  });
}

extern "C" int accel_options_set_int(accel_options_t* options, const char* key, int64_t value) {
  return set_option(__func__, options, key, value);
}

extern "C" int accel_options_set_double(accel_options_t* options, const char* key, double value) {
  return set_option(__func__, options, key, value);
}

extern "C" int accel_options_set_string(accel_options_t* options, const char* key, const char* value) {
  return guarded(__func__, [&] {
    require(options, "options");
    require(key, "key");
    require(value, "value");
    options->options.set(key, accel::OptionValue(std::string(value)));
  });
}

extern "C" int accel_options_set(accel_options_t* options, const char* key, const char* value) {
  return guarded(__func__, [&] {
    require(options, "options");
    require(key, "key");
    require(value, "value");
    options->options.set_text(key, value);
  });
}

extern "C" int accel_options_dump(const accel_options_t* options, char** out) {
  return guarded_out(__func__, out, [&] {
    require(options, "options");
    std::string dump;
    for (const auto* scope : option_catalog()) {
      dump += "# " + scope->object + " (" + scope->taken_by + ")\n";
      const auto own = options->options.restricted_to(*scope);
      dump += accel::resolve_options(*scope, &own, accel::process_env()).dump();
    }
    *out = static_cast<char*>(std::malloc(dump.size() + 1));
    if (*out == nullptr) throw std::bad_alloc();
    std::memcpy(*out, dump.c_str(), dump.size() + 1);
  });
}
