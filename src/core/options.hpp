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

struct OptionSpec {
  std::string key;
  OptionType type;
  OptionValue default_value;
  std::vector<std::string> choices;  // allowed strings, for String options that are enumerations
  bool positive = false;             // numeric options that must be > 0
  // Numeric options: the largest value accepted (timeout_s: beyond it, milliseconds overflow the clocks).
  double maximum = std::numeric_limits<double>::infinity();
};

// Every key the library understands, in documentation order.
const std::vector<OptionSpec>& option_specs();

// The environment variable that sets a key: ACCEL_ followed by the key in upper case.
std::string option_env_name(const std::string& key);

std::string format_option_value(const OptionValue& value);
// A number as a person writes it: 0.001, 1e-08, 25, 1e+10, 1234567 (the shortest ostream form that
// reads back as the same double).
std::string format_number(double value);

// Explicit settings made through the C API. Setting validates at once, so an object never holds a bad value.
class Options {
 public:
  // Throws Error(UnknownOption) or Error(BadOptionValue); an int is accepted for a double key.
  void set(const std::string& key, const OptionValue& value);
  // Parses text by the key's type, with the same errors.
  void set_text(const std::string& key, const std::string& text);
  const std::map<std::string, OptionValue>& values() const { return values_; }

 private:
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
  // "key=value (source)" lines in table order.
  std::string dump() const;

 private:
  friend ResolvedOptions resolve_options(const Options* explicit_options, const EnvLookup& env);
  std::map<std::string, std::pair<OptionValue, OptionSource>> entries_;
};

// defaults < ACCEL_<KEY> environment < explicit. Throws Error(BadOptionValue) naming a variable that does not parse.
ResolvedOptions resolve_options(const Options* explicit_options, const EnvLookup& env);

}  // namespace accel
