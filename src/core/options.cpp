#include "core/options.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"

namespace accel {

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs{
      {"use_cpu", OptionType::Bool, false, {}, false},
      {"mixed_precision", OptionType::String, std::string("no"), {"no", "fp16", "bf16"}, false},
      {"device", OptionType::String, std::string(""), {}, false},
      {"backend", OptionType::String, std::string("auto"), {"auto", "gloo", "nccl"}, false},
      {"timeout_s", OptionType::Double, 1800.0, {}, true},
      {"check_shapes", OptionType::Bool, true, {}, false},
      {"gradient_accumulation_steps", OptionType::Int, int64_t{1}, {}, true},
      {"sync_with_dataloader", OptionType::Bool, true, {}, false},
      {"sync_each_batch", OptionType::Bool, false, {}, false},
      {"batch_size", OptionType::Int, int64_t{1}, {}, true},
      {"shuffle", OptionType::Bool, false, {}, false},
      {"drop_last", OptionType::Bool, false, {}, false},
      {"split_batches", OptionType::Bool, false, {}, false},
      {"even_batches", OptionType::Bool, true, {}, false},
      {"dispatch_batches", OptionType::String, std::string("auto"), {"auto", "true", "false"}, false},
      {"use_seedable_sampler", OptionType::Bool, false, {}, false},
      {"data_seed", OptionType::Int, int64_t{-1}, {}, false},
      {"non_blocking", OptionType::Bool, false, {}, false},
      {"pin_memory", OptionType::Bool, false, {}, false},
      {"prefetch_threads", OptionType::Int, int64_t{0}, {}, false},
      {"prefetch_depth", OptionType::Int, int64_t{2}, {}, true},
      {"find_unused_parameters", OptionType::Bool, false, {}, false},
      {"bucket_cap_mb", OptionType::Double, 25.0, {}, true},
      {"first_bucket_mb", OptionType::Double, 1.0, {}, true},
      {"broadcast_buffers", OptionType::Bool, true, {}, false},
      {"convert_outputs_to_fp32", OptionType::Bool, true, {}, false},
      {"lr", OptionType::Double, 1e-3, {}, false},
      {"momentum", OptionType::Double, 0.0, {}, false},
      {"dampening", OptionType::Double, 0.0, {}, false},
      {"nesterov", OptionType::Bool, false, {}, false},
      {"weight_decay", OptionType::Double, 0.0, {}, false},
      {"beta1", OptionType::Double, 0.9, {}, false},
      {"beta2", OptionType::Double, 0.999, {}, false},
      {"eps", OptionType::Double, 1e-8, {}, true},
      {"no_decay", OptionType::String, std::string(""), {}, false},
      {"warmup_steps", OptionType::Int, int64_t{0}, {}, false},
      {"total_steps", OptionType::Int, int64_t{0}, {}, false},
      {"num_cycles", OptionType::Double, 0.5, {}, false},
      {"step_size", OptionType::Int, int64_t{1}, {}, true},
      {"gamma", OptionType::Double, 0.1, {}, false},
      {"max_lr", OptionType::Double, 0.0, {}, false},
      {"pct_start", OptionType::Double, 0.3, {}, false},
      {"div_factor", OptionType::Double, 25.0, {}, true},
      {"final_div_factor", OptionType::Double, 1e4, {}, true},
      {"reduction", OptionType::String, std::string("mean"), {"mean", "sum", "none"}, false},
      {"label_smoothing", OptionType::Double, 0.0, {}, false},
      {"ignore_index", OptionType::Int, int64_t{-100}, {}, false},
  };
  return specs;
}

std::string option_env_name(const std::string& key) {
  std::string name = "ACCEL_" + key;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
  return name;
}

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
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

const OptionSpec& find_spec(const std::string& key) {
  for (const auto& spec : option_specs()) {
    if (spec.key == key) return spec;
  }
  std::string known;
  for (const auto& spec : option_specs()) known += (known.empty() ? "" : ", ") + spec.key;
  fail(Code::UnknownOption, "unknown option '" + key + "' (known options: " + known + ")");
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
  if (spec.positive) {
    const double number = spec.type == OptionType::Int ? static_cast<double>(std::get<int64_t>(value))
                                                       : std::get<double>(value);
    if (!(number > 0) || !std::isfinite(number)) bad("must be a positive finite number");
  }
  if (!spec.choices.empty()) {
    const auto& text = std::get<std::string>(value);
    if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
      std::string allowed;
      for (const auto& c : spec.choices) allowed += (allowed.empty() ? "" : ", ") + c;
      bad("is not one of " + allowed);
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

void Options::set(const std::string& key, const OptionValue& value) {
  const auto& spec = find_spec(key);
  values_[key] = checked(spec, value, "value '" + format_option_value(value) + "'");
}

void Options::set_text(const std::string& key, const std::string& text) {
  const auto& spec = find_spec(key);
  values_[key] = parse_text(spec, text, "value '" + text + "'");
}

ResolvedOptions resolve_options(const Options* explicit_options, const EnvLookup& env) {
  ResolvedOptions resolved;
  for (const auto& spec : option_specs()) {
    std::pair<OptionValue, OptionSource> entry{spec.default_value, OptionSource::Default};
    if (explicit_options != nullptr && explicit_options->values().count(spec.key) != 0) {
      entry = {explicit_options->values().at(spec.key), OptionSource::Explicit};
    } else {
      const std::string var = option_env_name(spec.key);
      if (auto text = env(var); text && !text->empty()) {
        entry = {parse_text(spec, *text, "environment variable " + var + "='" + *text + "'"),
                 OptionSource::Environment};
      }
    }
    resolved.entries_[spec.key] = entry;
  }
  return resolved;
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
  for (const auto& spec : option_specs()) {
    const auto& [value, source] = entries_.at(spec.key);
    const char* from = source == OptionSource::Default ? "default" : source == OptionSource::Environment ? "env" : "set";
    out += spec.key + "=" + format_option_value(value) + " (" + from + ")\n";
  }
  return out;
}

}  // namespace accel
