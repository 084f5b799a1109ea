// Options: the key table, explicit settings, and their resolution against defaults and ACCEL_* variables.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/env.hpp"

namespace accel {

using OptionValue = std::variant<bool, int64_t, double, std::string>;

enum class OptionType { Bool, Int, Double, String };

// A numeric option's bound that does not bound: OptionSpec's maximum, above and below when unset.
inline constexpr double kNoLimit = std::numeric_limits<double>::infinity();

struct OptionSpec {
  std::string key;
  OptionType type;
  OptionValue default_value;
  std::vector<std::string> choices;  // allowed strings, for String options that are enumerations
  bool positive = false;             // numeric options that must be > 0
  // Numeric options: the largest value accepted (timeout_s: beyond it, milliseconds overflow the clocks).
  double maximum = kNoLimit;
  // Numeric options: bounds the value must lie strictly between (the grad scaler's growth_factor > 1,
  // backoff_factor < 1).
  double above = -kNoLimit;
  double below = kNoLimit;
  // String options with choices: a comma-separated list of them, possibly empty (rng_types).
  bool list = false;
};

// The keys one kind of object reads (state, loader, model, optimizer, scheduler, loss), owned by that
// object's area: its name in messages, the C function that takes them, and whether ACCEL_<KEY>
// environment variables apply (state-level settings only, as Accelerate's ACCELERATE_* do).
struct OptionScope {
  std::string object;
  std::string taken_by;
  bool from_environment = false;
  std::vector<OptionSpec> specs;

  const OptionSpec* find(const std::string& key) const;
};

// Every scope an options object may hold keys of; a key may appear in several scopes with one spec.
using OptionCatalog = std::vector<const OptionScope*>;

// The environment variable that sets a key: ACCEL_ followed by the key in upper case.
std::string option_env_name(const std::string& key);

// The items of a comma-separated option value, spaces around each trimmed, empty ones skipped.
std::vector<std::string> option_list(const std::string& text);

std::string format_option_value(const OptionValue& value);
// A number as a person writes it: 0.001, 1e-08, 25, 1e+10, 1234567 (the shortest ostream form that
// reads back as the same double).
std::string format_number(double value);

// Explicit settings made through the C API, for any of the catalog's objects. Setting validates at once,
// so an object never holds a bad value; which object may take which key is checked when one resolves it.
class Options {
 public:
  explicit Options(OptionCatalog catalog) : catalog_(std::move(catalog)) {}
  // Throws Error(UnknownOption) (naming the key and every known one) or Error(BadOptionValue); an int is
  // accepted for a double key.
  void set(const std::string& key, const OptionValue& value);
  // Parses text by the key's type, with the same errors.
  void set_text(const std::string& key, const std::string& text);
  const std::map<std::string, OptionValue>& values() const { return values_; }
  const OptionCatalog& catalog() const { return catalog_; }
  // A copy holding only the keys scope reads (to show each object's share of one options object).
  Options restricted_to(const OptionScope& scope) const;

 private:
  const OptionSpec& spec_of(const std::string& key) const;

  OptionCatalog catalog_;
  std::map<std::string, OptionValue> values_;
};

enum class OptionSource { Default, Environment, Explicit };

// Every key's value in effect, with where it came from.
class ResolvedOptions {
 public:
  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const OptionValue& value(const std::string& key) const;
  OptionSource source(const std::string& key) const;
  // "key=value (source)" lines in the scope's order.
  std::string dump() const;
  // The first key whose value differs from other's, but for the ignored ones, or "" when they agree (same scope
  // expected).
  std::string first_difference(const ResolvedOptions& other, const std::vector<std::string>& ignored = {}) const;

 private:
  friend ResolvedOptions resolve_options(const OptionScope& scope, const Options* explicit_options, const EnvLookup& env);
  std::vector<std::string> order_;
  std::map<std::string, std::pair<OptionValue, OptionSource>> entries_;
};

// The scope's keys: defaults < ACCEL_<KEY> environment (scopes that read it) < explicit. Throws
// Error(BadOptionValue) naming a variable that does not parse, and Error(UnknownOption) for an explicit
// key of another object, naming the object and the function it belongs to.
ResolvedOptions resolve_options(const OptionScope& scope, const Options* explicit_options, const EnvLookup& env);
// The same for a scope that reads no environment variable (every object's but the state's).
ResolvedOptions resolve_options(const OptionScope& scope, const Options* explicit_options);

// The ACCEL_* names among variable_names that set no key of scope and are not in also_known: what a
// warning should name.
std::vector<std::string> unknown_environment_settings(const OptionScope& scope,
                                                      const std::vector<std::string>& variable_names,
                                                      const std::vector<std::string>& also_known);

}  // namespace accel
