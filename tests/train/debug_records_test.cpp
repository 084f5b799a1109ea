#include "train/torchscript/debug_records.hpp"

#include <ATen/core/ivalue.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <string>
#include <vector>

namespace accel::train {
namespace {

using c10::IValue;
using c10::ivalue::Tuple;

std::string pickled(const IValue& value) {
  const std::vector<char> bytes = torch::jit::pickle(value, nullptr);
  return std::string(bytes.begin(), bytes.end());
}

IValue range(const IValue& source, int64_t start, int64_t end) { return Tuple::create({source, start, end}); }

// torch.jit.save's newer layout: a marker, the text table, then (byte offset, range, tag) entries whose
// sources index the table.
IValue with_table(std::vector<int64_t> text_indices, int64_t file_index) {
  const IValue source = Tuple::create({c10::List<int64_t>(text_indices), file_index, int64_t{1}});
  const IValue texts = Tuple::create({IValue(std::string("")), IValue(std::string("def f(x):\n  return x\n")),
                                      IValue(std::string("code/f.py"))});
  return Tuple::create({IValue(std::string("FORMAT_WITH_STRING_TABLE")), texts,
                        Tuple::create({Tuple::create({int64_t{0}, range(source, 0, 9), int64_t{-1}})})});
}

TEST(DebugRecords, WhatTorchWritesIsReadable) {
  const IValue old_source = Tuple::create({IValue(std::string("def f(x): return x")), IValue(), int64_t{1}});
  EXPECT_EQ(malformed_debug_record(pickled(Tuple::create({Tuple::create({int64_t{0}, range(old_source, 0, 5)})}))),
            std::nullopt);
  EXPECT_EQ(malformed_debug_record(pickled(with_table({1}, 2))), std::nullopt);
  EXPECT_EQ(malformed_debug_record(pickled(with_table({}, 0))), std::nullopt);  // a source without its text
}

// LibTorch 1.13 indexes the text table unchecked: the crash fuzz_model_load found.
TEST(DebugRecords, AnIndexOutsideTheTextTableIsFound) {
  EXPECT_EQ(malformed_debug_record(pickled(with_table({1, 7}, 2))),
            "entry 0 has a text index 7 outside the table of 3");
  EXPECT_NE(malformed_debug_record(pickled(with_table({1}, 3))), std::nullopt);  // the file name's index
}

TEST(DebugRecords, ShapesLibTorchWouldReadPastAreFound) {
  EXPECT_EQ(malformed_debug_record(pickled(IValue(int64_t{3}))), "is not a tuple of source ranges");
  EXPECT_EQ(malformed_debug_record(pickled(Tuple::create({Tuple::create({int64_t{0}})}))),
            "entry 0 is not (byte offset, source range)");
  const IValue short_range = Tuple::create({Tuple::create({int64_t{0}, Tuple::create({int64_t{1}, int64_t{2}})})});
  EXPECT_EQ(malformed_debug_record(pickled(short_range)), "entry 0's source range is not (source, start, end)");
  EXPECT_EQ(malformed_debug_record(pickled(Tuple::create({IValue(std::string("FORMAT_WITH_STRING_TABLE"))}))),
            "has a text table marker without its table and entries");
  const auto garbage = malformed_debug_record(std::string("\x80\x02garbage", 9));
  ASSERT_TRUE(garbage.has_value());
  EXPECT_EQ(garbage->rfind("is not a pickle LibTorch reads", 0), 0u) << *garbage;
}

}  // namespace
}  // namespace accel::train
