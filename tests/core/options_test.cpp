#include <gtest/gtest.h>

#include <map>

#include "core/error.hpp"
#include "core/options.hpp"
#include "data/loader_options.hpp"
#include "distributed/state_options.hpp"
#include "train/training_options.hpp"

namespace accel {
namespace {

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const OptionScope& state_scope() { return distributed::state_option_scope(); }

OptionCatalog catalog() {
  return {&distributed::state_option_scope(), &data::loader_option_scope(), &train::optimizer_option_scope()};
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
  auto resolved = resolve_options(state_scope(), nullptr, fake_env({}));
  EXPECT_FALSE(resolved.get_bool("use_cpu"));
  EXPECT_EQ(resolved.get_string("mixed_precision"), "no");
  EXPECT_EQ(resolved.get_double("timeout_s"), 1800.0);
  EXPECT_TRUE(resolved.get_bool("check_shapes"));
  EXPECT_EQ(resolved.source("use_cpu"), OptionSource::Default);
}

TEST(Options, EnvironmentBeatsDefaultsAndExplicitBeatsEnvironment) {
  Options options(catalog());
  options.set("mixed_precision", std::string("fp16"));
  auto resolved = resolve_options(state_scope(), &options, fake_env({{"ACCEL_MIXED_PRECISION", "bf16"}, {"ACCEL_USE_CPU", "yes"}}));
  EXPECT_EQ(resolved.get_string("mixed_precision"), "fp16");
  EXPECT_EQ(resolved.source("mixed_precision"), OptionSource::Explicit);
  EXPECT_TRUE(resolved.get_bool("use_cpu"));
  EXPECT_EQ(resolved.source("use_cpu"), OptionSource::Environment);
}

TEST(Options, UnknownKeyNamesTheKey) {
  Options options(catalog());
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
  Options options(catalog());
  EXPECT_EQ(code_of([&] { options.set("mixed_precision", std::string("fp8")); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("timeout_s", -1.0); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("use_cpu", int64_t{1}); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set_text("check_shapes", "maybe"); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set_text("timeout_s", "10s"); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("device", std::string("tpu:0")); }), Code::BadOptionValue);
  EXPECT_TRUE(options.values().empty());
}

// Beyond 1e9 s the timeout overflowed the clocks (9.2e9 s became a negative number of nanoseconds).
TEST(Options, TimeoutAboveTheMaximumIsRefusedNamingTheKey) {
  Options options(catalog());
  options.set("timeout_s", 1e9);
  try {
    options.set("timeout_s", 1e10);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::BadOptionValue);
    EXPECT_NE(std::string(error.what()).find("'timeout_s'"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("1e+10"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("1e+09"), std::string::npos) << error.what();
  }
  EXPECT_DOUBLE_EQ(std::get<double>(options.values().at("timeout_s")), 1e9);
  try {
    resolve_options(state_scope(), nullptr, fake_env({{"ACCEL_TIMEOUT_S", "9.3e9"}}));
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::BadOptionValue);
    EXPECT_NE(std::string(error.what()).find("ACCEL_TIMEOUT_S"), std::string::npos) << error.what();
  }
}

// GradScalerKwargs as torch asserts them (growth_factor > 1, backoff_factor < 1), refused when set.
TEST(Options, GradScalerFactorsAreBoundedStrictly) {
  Options options(catalog());
  EXPECT_EQ(code_of([&] { options.set("growth_factor", 1.0); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("backoff_factor", 1.0); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("backoff_factor", 0.0); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set("growth_interval", int64_t{0}); }), Code::BadOptionValue);
  try {
    options.set_text("growth_factor", "0.5");
    FAIL() << "accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("must be greater than 1"), std::string::npos) << error.what();
  }
  options.set("growth_factor", 1.5);
  options.set_text("backoff_factor", "0.999");
  EXPECT_EQ(options.values().size(), 2u);
}

// rng_types is a list of choices: any subset of generator, torch and cuda, the empty list included.
TEST(Options, RngTypesIsACommaSeparatedListOfChoices) {
  Options options(catalog());
  options.set_text("rng_types", " torch , generator,cuda");
  options.set_text("rng_types", "");
  try {
    options.set_text("rng_types", "generator,numpy");
    FAIL() << "accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::BadOptionValue);
    EXPECT_NE(std::string(error.what()).find("names 'numpy', which is not one of generator, torch, cuda"),
              std::string::npos) << error.what();
  }
  EXPECT_EQ(option_list(" torch , generator,,cuda "), (std::vector<std::string>{"torch", "generator", "cuda"}));
}

TEST(Options, NumbersAreFormattedExactly) {
  EXPECT_EQ(format_number(1800), "1800");
  EXPECT_EQ(format_number(2.5), "2.5");
  EXPECT_EQ(format_number(0.001), "0.001");
  EXPECT_EQ(format_number(1e-8), "1e-08");
  EXPECT_EQ(format_number(1e10), "1e+10");
  EXPECT_EQ(format_number(1234567), "1234567");
  EXPECT_EQ(format_number(100000.5), "100000.5");
  EXPECT_EQ(format_number(0.1 + 0.2), "0.30000000000000004");
}

TEST(Options, TextAndIntegerFormsConvert) {
  Options options(catalog());
  options.set_text("use_cpu", "ON");
  options.set_text("timeout_s", "2.5");
  options.set("check_shapes", false);
  auto resolved = resolve_options(state_scope(), &options, fake_env({}));
  EXPECT_TRUE(resolved.get_bool("use_cpu"));
  EXPECT_DOUBLE_EQ(resolved.get_double("timeout_s"), 2.5);
  options.set("timeout_s", int64_t{30});
  EXPECT_DOUBLE_EQ(resolve_options(state_scope(), &options, fake_env({})).get_double("timeout_s"), 30.0);
  EXPECT_FALSE(resolved.get_bool("check_shapes"));
}

// Found by tests/fuzz/options_text_fuzz.cpp: 2.2250738585072014e-308 (the smallest normal double) was
// accepted but printed as 2.22507e-308, which the parser then refused as "not a number".
TEST(Options, NumbersTooSmallToBeNormalAreNumbersButOverflowIsNot) {
  Options options(catalog());
  options.set_text("lr", "2.2250738585072014e-308");
  const std::string printed = format_option_value(options.values().at("lr"));
  options.set_text("lr", printed);
  EXPECT_EQ(std::get<double>(options.values().at("lr")), 2.2250738585072014e-308) << printed;
  options.set_text("lr", "1e-320");
  EXPECT_EQ(std::get<double>(options.values().at("lr")), 1e-320);
  EXPECT_EQ(code_of([&] { options.set_text("lr", "1e999"); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set_text("lr", ""); }), Code::BadOptionValue);
  EXPECT_EQ(code_of([&] { options.set_text("lr", std::string("1\0", 2)); }), Code::BadOptionValue);
}

TEST(Options, MalformedEnvironmentVariableIsNamed) {
  try {
    resolve_options(state_scope(), nullptr, fake_env({{"ACCEL_TIMEOUT_S", "soon"}}));
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::BadOptionValue);
    EXPECT_NE(std::string(error.what()).find("ACCEL_TIMEOUT_S"), std::string::npos);
  }
}

TEST(Options, DumpListsEveryKeyWithItsSource) {
  Options options(catalog());
  options.set("use_cpu", true);
  auto dump = resolve_options(state_scope(), &options, fake_env({{"ACCEL_MIXED_PRECISION", "bf16"}})).dump();
  EXPECT_NE(dump.find("use_cpu=true (set)"), std::string::npos);
  EXPECT_NE(dump.find("mixed_precision=bf16 (env)"), std::string::npos);
  EXPECT_NE(dump.find("check_shapes=true (default)"), std::string::npos);
}

TEST(Options, KeyOfAnotherObjectIsRefusedNamingWhereItBelongs) {
  Options options(catalog());
  options.set("lr", 0.1);
  try {
    resolve_options(data::loader_option_scope(), &options, fake_env({}));
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Code::UnknownOption);
    const std::string message = error.what();
    EXPECT_NE(message.find("'lr'"), std::string::npos) << message;
    EXPECT_NE(message.find("loader (accel_loader_new)"), std::string::npos) << message;
    EXPECT_NE(message.find("optimizer (accel_optimizer_new)"), std::string::npos) << message;
  }
  EXPECT_DOUBLE_EQ(resolve_options(train::optimizer_option_scope(), &options, fake_env({})).get_double("lr"), 0.1);
}

TEST(Options, EnvironmentSetsStateSettingsOnly) {
  const auto env = fake_env({{"ACCEL_BATCH_SIZE", "7"}, {"ACCEL_LR", "0.5"}, {"ACCEL_GAMMA", "0.9"}});
  EXPECT_EQ(resolve_options(data::loader_option_scope(), nullptr, env).get_int("batch_size"), 1);
  EXPECT_DOUBLE_EQ(resolve_options(train::optimizer_option_scope(), nullptr, env).get_double("lr"), 1e-3);
  EXPECT_DOUBLE_EQ(resolve_options(train::scheduler_option_scope(), nullptr, env).get_double("gamma"), 0.1);
  EXPECT_EQ(resolve_options(state_scope(), nullptr, fake_env({{"ACCEL_GRADIENT_ACCUMULATION_STEPS", "4"}}))
                .get_int("gradient_accumulation_steps"),
            4);
}

TEST(Options, UnknownEnvironmentVariablesAreListed) {
  const auto unknown = unknown_environment_settings(
      state_scope(), {"ACCEL_LR", "ACCEL_USE_CPU", "ACCEL_LIBRARY", "PATH", "ACCEL_MIXED_PRECISON", "ACCEL_RESTART_COUNT"},
      distributed::non_option_variables());
  EXPECT_EQ(unknown, (std::vector<std::string>{"ACCEL_LR", "ACCEL_MIXED_PRECISON"}));
}

TEST(Options, FirstDifferenceNamesAnyStateKey) {
  Options wanted(catalog());
  wanted.set("sync_each_batch", true);
  const auto existing = resolve_options(state_scope(), nullptr, fake_env({}));
  EXPECT_EQ(existing.first_difference(resolve_options(state_scope(), &wanted, fake_env({}))), "sync_each_batch");
  EXPECT_EQ(existing.first_difference(resolve_options(state_scope(), nullptr, fake_env({}))), "");
}

}  // namespace
}  // namespace accel
