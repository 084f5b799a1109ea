// Names bound for files other programs read must be UTF-8 (core/utf8.hpp), and the JSON writer refuses
// anything else: a standard JSON reader rejects a header holding raw non-UTF-8 bytes.
#include "core/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

#include "expect_error.hpp"
#include "formats/json.hpp"

namespace accel {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  for (const std::string text : {"", "fc.weight", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_FALSE(first_invalid_utf8(text).has_value()) << escaped_bytes(text);
  }
}

TEST(Utf8, FindsTheFirstBadByte) {
  const std::pair<std::string, size_t> cases[] = {
      {"ab\xff", 2},              // never in UTF-8
      {"\x80", 0},                // a continuation byte alone
      {"a\xc3", 1},               // cut short
      {"\xc0\xaf", 0},            // overlong '/'
      {"\xe0\x80\xaf", 0},        // overlong, three bytes
      {"\xed\xa0\x80", 0},        // a surrogate
      {"\xf4\x90\x80\x80", 0},    // past U+10FFFF
      {"ok\xe2\x82", 2},          // a three-byte sequence missing its last
  };
  for (const auto& [text, offset] : cases) {
    const auto found = first_invalid_utf8(text);
    ASSERT_TRUE(found.has_value()) << escaped_bytes(text);
    EXPECT_EQ(*found, offset) << escaped_bytes(text);
  }
}

TEST(Utf8, TheRefusalNamesTheBytesInPrintableForm) {
  expect_error(Code::InvalidArgument, "parameter name 'w\\xff1' is not UTF-8 (byte 0xff at offset 1)",
               [] { require_utf8("w\xff" "1", "parameter name"); });
}

TEST(Utf8, JsonQuoteRefusesWhatNoReaderTakes) {
  EXPECT_EQ(formats::json_quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  expect_error(Code::InvalidArgument, "not UTF-8", [] { formats::json_quote("bad\xfe"); });
}

}  // namespace
}  // namespace accel
