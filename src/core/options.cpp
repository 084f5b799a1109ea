#include "core/options.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"

namespace accel {

const OptionSpec* OptionScope::find(const std::string& key) const {
  for (const auto& spec : specs) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

std::string option_env_name(const std::string& key) { return upper_case("ACCEL_" + key); }

std::string format_number(double value) {
  // Six digits (ostream's default) say most numbers exactly; more only when they would change the value.
  std::string text;
  for (int digits = 6; digits <= std::numeric_limits<double>::max_digits10; ++digits) {
    std::ostringstream out;
    out.precision(digits);
    out << value;
    text = out.str();
    double read_back = 0;
    std::istringstream(text) >> read_back;
    if (!std::isfinite(value) || read_back == value) break;
  }
  return text;
}

std::string format_option_value(const OptionValue& value) {
  struct Formatter {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return format_number(v); }
    std::string operator()(const std::string& v) const { return v; }
  };
  return std::visit(Formatter{}, value);
}

namespace {

const char* type_name(OptionType type) {
  switch (type) {
    case OptionType::Bool: return "a boolean";
    case OptionType::Int: return "an integer";
    case OptionType::Double: return "a number";
    case OptionType::String: return "a string";
  }
  return "?";
}

[[noreturn]] void not_of_type(const OptionSpec& spec, const std::string& shown) {
  fail(Code::BadOptionValue, "option '" + spec.key + "': " + shown + " is not " + type_name(spec.type));
}

bool is_device_string(const std::string& text) {
  if (text.empty() || text == "cpu" || text == "cuda") return true;
  if (text.rfind("cuda:", 0) != 0 || text.size() == 5) return false;
  return std::all_of(text.begin() + 5, text.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Brings value to the key's type and checks its range; `shown` is how the value is named in errors.
OptionValue checked(const OptionSpec& spec, OptionValue value, const std::string& shown) {
  auto bad = [&](const std::string& why) {
    fail(Code::BadOptionValue, "option '" + spec.key + "': " + shown + " " + why);
  };
  if (spec.type == OptionType::Double && std::holds_alternative<int64_t>(value)) {
    value = static_cast<double>(std::get<int64_t>(value));
  }
  const bool type_ok = (spec.type == OptionType::Bool && std::holds_alternative<bool>(value)) ||
                       (spec.type == OptionType::Int && std::holds_alternative<int64_t>(value)) ||
                       (spec.type == OptionType::Double && std::holds_alternative<double>(value)) ||
                       (spec.type == OptionType::String && std::holds_alternative<std::string>(value));
  if (!type_ok) not_of_type(spec, shown);
  if (spec.type == OptionType::Double || spec.type == OptionType::Int) {
    const double number = spec.type == OptionType::Int ? static_cast<double>(std::get<int64_t>(value))
                                                       : std::get<double>(value);
    if (spec.positive && (!(number > 0) || !std::isfinite(number))) bad("must be a positive finite number");
    if (spec.type == OptionType::Double && number > spec.maximum) {
      bad("is larger than the maximum, " + format_number(spec.maximum));
    }
    if (std::isfinite(spec.above) && !(number > spec.above)) bad("must be greater than " + format_number(spec.above));
    if (std::isfinite(spec.below) && !(number < spec.below)) bad("must be less than " + format_number(spec.below));
  }
  if (!spec.choices.empty()) {
    const auto& text = std::get<std::string>(value);
    const auto items = spec.list ? option_list(text) : std::vector<std::string>{text};
    for (const auto& item : items) {
      if (std::find(spec.choices.begin(), spec.choices.end(), item) == spec.choices.end()) {
        std::string allowed;
        for (const auto& c : spec.choices) allowed += (allowed.empty() ? "" : ", ") + c;
        bad(spec.list ? "names '" + item + "', which is not one of " + allowed : "is not one of " + allowed);
      }
    }
  }
  if (spec.key == "device" && !is_device_string(std::get<std::string>(value))) {
    bad("is not a device (expected cpu, cuda or cuda:<index>)");
  }
  return value;
}

OptionValue parse_text(const OptionSpec& spec, const std::string& text, const std::string& shown) {
  auto bad = [&]() { not_of_type(spec, shown); };
  switch (spec.type) {
    case OptionType::Bool: {
      auto flag = parse_flag(text);
      if (!flag) bad();
      return checked(spec, *flag, shown);
    }
    case OptionType::Int: {
      size_t used = 0;
      int64_t number = 0;
      try {
        number = std::stoll(text, &used);
      } catch (const std::exception&) {
        bad();
      }
      if (used != text.size()) bad();
      return checked(spec, number, shown);
    }
    case OptionType::Double: {
      // strtod rather than std::stod: stod throws for results too small to be normal (ERANGE on underflow),
      // yet 1e-310 is a double, and format_number prints such values. Only overflow (inf) is refused.
      const char* begin = text.c_str();
      char* end = nullptr;
      errno = 0;
      const double number = std::strtod(begin, &end);
      if (end == begin || end != begin + text.size() || (errno == ERANGE && std::isinf(number))) bad();
      return checked(spec, number, shown);
    }
    case OptionType::String: return checked(spec, text, shown);
  }
  not_of_type(spec, shown);
}

}  // namespace

std::vector<std::string> option_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    const size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    items.push_back(item.substr(first, item.find_last_not_of(' ') - first + 1));
  }
  return items;
}

const OptionSpec& Options::spec_of(const std::string& key) const {
  for (const auto* scope : catalog_) {
    if (const auto* spec = scope->find(key)) return *spec;
  }
  std::string known;
  for (const auto* scope : catalog_) {
    for (const auto& spec : scope->specs) known += (known.empty() ? "" : ", ") + spec.key;
  }
  fail(Code::UnknownOption, "unknown option '" + key + "' (known options: " + known + ")");
}

void Options::set(const std::string& key, const OptionValue& value) {
  const auto& spec = spec_of(key);
  values_[key] = checked(spec, value, "value '" + format_option_value(value) + "'");
}

void Options::set_text(const std::string& key, const std::string& text) {
  const auto& spec = spec_of(key);
  values_[key] = parse_text(spec, text, "value '" + text + "'");
}

Options Options::restricted_to(const OptionScope& scope) const {
  Options copy(catalog_);
  for (const auto& entry : values_) {
    if (scope.find(entry.first) != nullptr) copy.values_.insert(entry);
  }
  return copy;
}

namespace {

// An explicit key the scope does not read: name the objects that do, so the caller can move it there.
[[noreturn]] void wrong_object(const OptionScope& scope, const Options& options, const std::string& key) {
  std::string owners;
  for (const auto* other : options.catalog()) {
    if (other->find(key) != nullptr) {
      owners += (owners.empty() ? "" : " or ") + std::string("the ") + other->object + " (" + other->taken_by + ")";
    }
  }
  fail(Code::UnknownOption, "option '" + key + "' is not a setting of the " + scope.object + " (" + scope.taken_by +
                                ")" + (owners.empty() ? "" : ": it belongs to " + owners));
}

}  // namespace

ResolvedOptions resolve_options(const OptionScope& scope, const Options* explicit_options) {
  return resolve_options(scope, explicit_options, [](const std::string&) { return std::nullopt; });
}

ResolvedOptions resolve_options(const OptionScope& scope, const Options* explicit_options, const EnvLookup& env) {
  if (explicit_options != nullptr) {
    for (const auto& entry : explicit_options->values()) {
      if (scope.find(entry.first) == nullptr) wrong_object(scope, *explicit_options, entry.first);
    }
  }
  ResolvedOptions resolved;
  for (const auto& spec : scope.specs) {
    std::pair<OptionValue, OptionSource> entry{spec.default_value, OptionSource::Default};
    if (explicit_options != nullptr && explicit_options->values().count(spec.key) != 0) {
      entry = {explicit_options->values().at(spec.key), OptionSource::Explicit};
    } else if (scope.from_environment) {
      const std::string var = option_env_name(spec.key);
      if (auto text = env(var); text && !text->empty()) {
        entry = {parse_text(spec, *text, "environment variable " + var + "='" + *text + "'"),
                 OptionSource::Environment};
      }
    }
    resolved.order_.push_back(spec.key);
    resolved.entries_[spec.key] = entry;
  }
  return resolved;
}

std::vector<std::string> unknown_environment_settings(const OptionScope& scope,
                                                      const std::vector<std::string>& variable_names,
                                                      const std::vector<std::string>& also_known) {
  std::vector<std::string> unknown;
  for (const auto& name : variable_names) {
    if (name.rfind("ACCEL_", 0) != 0) continue;
    bool known = std::find(also_known.begin(), also_known.end(), name) != also_known.end();
    for (const auto& spec : scope.specs) known = known || option_env_name(spec.key) == name;
    if (!known) unknown.push_back(name);
  }
  return unknown;
}

const OptionValue& ResolvedOptions::value(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) fail(Code::Internal, "option '" + key + "' was not resolved");
  return it->second.first;
}

bool ResolvedOptions::get_bool(const std::string& key) const { return std::get<bool>(value(key)); }
int64_t ResolvedOptions::get_int(const std::string& key) const { return std::get<int64_t>(value(key)); }
double ResolvedOptions::get_double(const std::string& key) const { return std::get<double>(value(key)); }
const std::string& ResolvedOptions::get_string(const std::string& key) const {
  return std::get<std::string>(value(key));
}

OptionSource ResolvedOptions::source(const std::string& key) const {
  value(key);
  return entries_.at(key).second;
}

std::string ResolvedOptions::dump() const {
  std::string out;
  for (const auto& key : order_) {
    const auto& [value, source] = entries_.at(key);
    const char* from = source == OptionSource::Default ? "default" : source == OptionSource::Environment ? "env" : "set";
    out += key + "=" + format_option_value(value) + " (" + from + ")\n";
  }
  return out;
}

std::string ResolvedOptions::first_difference(const ResolvedOptions& other, const std::vector<std::string>& ignored) const {
  for (const auto& key : order_) {
    if (std::find(ignored.begin(), ignored.end(), key) != ignored.end()) continue;
    const auto theirs = other.entries_.find(key);
    if (theirs == other.entries_.end() || theirs->second.first != entries_.at(key).first) return key;
  }
  return "";
}

}  // namespace accel
