#include <gtest/gtest.h>

#include <map>

#include "core/error.hpp"
#include "core/options.hpp"

namespace accel {
namespace {

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Code code_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.code();
  }
  return static_cast<Code>(0);
}

TEST(Options, DefaultsWhenNothingIsSet) {
  auto resolved = resolve_options(nullptr, fake_env({}));
  EXPECT_FALSE(resolved.get_bool("use_cpu"));
  EXPECT_EQ(resolved.get_string("mixed_precision"), "no");
  EXPECT_EQ(resolved.get_double("timeout_s"), 1800.0);
  EXPECT_TRUE(resolved.get_bool("check_shapes"));
  EXPECT_EQ(resolved.source("use_cpu"), OptionSource::Default);
}

TEST(Options, EnvironmentBeatsDefaultsAndExplicitBeatsEnvironment) {
  Options options;
  options.set("mixed_precision", std::string("fp16"));
  auto resolved = resolve_options(&options, fake_env({{"ACCEL_MIXED_PRECISION", "bf16"}, {"ACCEL_USE_CPU", "yes"}}));
  EXPECT_EQ(resolved.get_string("mixed_precision"), "fp16");
  EXPECT_EQ(resolved.source("mixed_precision"), OptionSource::Explicit);
  EXPECT_TRUE(resolved.get_bool("use_cpu"));
  EXPECT_EQ(resolved.source("use_cpu"), OptionSource::Environment);
}

TEST(Options, UnknownKeyNamesTheKey) {
  Options options;
  try {
    options.set("use_gpu", true);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::UnknownOption);
    EXPECT_NE(std::string(error.what()).find("'use_gpu'"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("use_cpu"), std::string::npos);
  }
}

TEST(Options, BadValuesAreRefusedAndLeaveTheObjectUnchanged) {
  Options options;
  EXPECT_EQ(code_of([&] { options.set("mixed_precision", std::string("fp8")); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("timeout_s", -1.0); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("use_cpu", int64_t{1}); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set_text("check_shapes", "maybe"); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set_text("timeout_s", "10s"); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("device", std::string("tpu:0")); }), Code::BadOptionValue);
  EXPECT_TRUE(options.values().empty());
}

TEST(Options, TextAndIntegerFormsConvert) {
  Options options;
  options.set_text("use_cpu", "ON");
  options.set_text("timeout_s", "2.5");
  options.set("check_shapes", false);
  auto resolved = resolve_options(&options, fake_env({}));
  EXPECT_TRUE(resolved.get_bool("use_cpu"));
  EXPECT_DOUBLE_EQ(resolved.get_double("timeout_s"), 2.5);
  options.set("timeout_s", int64_t{30});
  EXPECT_DOUBLE_EQ(resolve_options(&options, fake_env({})).get_double("timeout_s"), 30.0);
  EXPECT_FALSE(resolved.get_bool("check_shapes"));
}

// Found by tests/fuzz/options_text_fuzz.cpp: 2.2250738585072014e-308 (the smallest normal double) was
// accepted but printed as 2.22507e-308, which the parser then refused as "not a number".
TEST(Options, NumbersTooSmallToBeNormalAreNumbersButOverflowIsNot) {
  Options options;
  options.set_text("lr", "2.2250738585072014e-308");
  const std::string printed = format_option_value(options.values().at("lr"));
  EXPECT_EQ(printed, "2.22507e-308");
  options.set_text("lr", printed);
  options.set_text("lr", "1e-320");
  EXPECT_EQ(std::get<double>(options.values().at("lr")), 1e-320);
  EXPECT_EQ(code_of([&] { options.set_text("lr", "1e999"); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set_text("lr", ""); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set_text("lr", std::string("1\0", 2)); }), Code::BadOptionValue);
}

TEST(Options, MalformedEnvironmentVariableIsNamed) {
  try {
    resolve_options(nullptr, fake_env({{"ACCEL_TIMEOUT_S", "soon"}}));
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::BadOptionValue);
    EXPECT_NE(std::string(error.what()).find("ACCEL_TIMEOUT_S"), std::string::npos);
  }
}

TEST(Options, DumpListsEveryKeyWithItsSource) {
  Options options;
  options.set("use_cpu", true);
  auto dump = resolve_options(&options, fake_env({{"ACCEL_MIXED_PRECISION", "bf16"}})).dump();
  EXPECT_NE(dump.find("use_cpu=true (set)"), std::string::npos);
  EXPECT_NE(dump.find("mixed_precision=bf16 (env)"), std::string::npos);
  EXPECT_NE(dump.find("check_shapes=true (default)"), std::string::npos);
}

}  // namespace
}  // namespace accel
