#include "train/torchscript/pickle_lengths.hpp"

#include <gtest/gtest.h>

#include <string>

namespace accel::train {
namespace {

// Protocol 2, as torch.save writes: PROTO 2, BINUNICODE "cpu", BINPUT 0, SHORT_BINBYTES, BININT1 6,
// GLOBAL "torch\nFloatStorage\n", MARK, TUPLE, BINFLOAT, LONG1, STOP.
const std::string kPickle = std::string("\x80\x02X\x03\x00\x00\x00" "cpuq\x00" "C\x02" "ab" "K\x06", 18) +
                            "ctorch\nFloatStorage\n(tG" + std::string(8, '\0') + std::string("\x8a\x01\x05.", 4);

TEST(PickleLengths, AWellFormedPickleHasNoOverlongArgument) { EXPECT_EQ(pickle_overreach(kPickle), std::nullopt); }

// The pickle that made LibTorch's unpickler allocate 2 GB: one byte of a string's length changed.
TEST(PickleLengths, AStringLongerThanThePickleIsFound) {
  std::string pickle = kPickle;
  pickle[6] = '\x7e';  // BINUNICODE's length: 0x7e000003
  EXPECT_EQ(pickle_overreach(pickle),
            "an argument of 2113929219 bytes at byte 2, but " + std::to_string(kPickle.size() - 7) + " bytes follow");
  pickle = kPickle;
  pickle[13] = '\x30';  // SHORT_BINBYTES announces 48 bytes
  ASSERT_TRUE(pickle_overreach(pickle).has_value());
  EXPECT_NE(pickle_overreach(pickle)->find("48 bytes at byte 12"), std::string::npos);
}

// A memo slot no pickle of this size could fill (LibTorch's unpickler sized its memo to it: 27 GB), in
// binary and in text.
TEST(PickleLengths, AMemoIndexBeyondThePickleIsFound) {
  std::string pickle = kPickle;
  pickle[11] = '\x7f';  // BINPUT 127
  const std::string size = std::to_string(kPickle.size());
  EXPECT_EQ(pickle_overreach(pickle),
            "memo index 127 at byte 10, beyond the " + size + " slots a pickle of " + size + " bytes can fill");
  EXPECT_EQ(pickle_overreach(std::string("\x80\x02Nr\x01\x71\x74\x63.", 9)),
            "memo index 1668575489 at byte 3, beyond the 9 slots a pickle of 9 bytes can fill");
  EXPECT_EQ(pickle_overreach("Np99\n."), "memo index 99 at byte 1, beyond the 6 slots a pickle of 6 bytes can fill");
  EXPECT_EQ(pickle_overreach("Np0\ng0\n."), std::nullopt);
}

// An opcode it does not know ends the walk without a verdict: the unpickler refuses what it cannot read.
TEST(PickleLengths, AnUnknownOpcodeStopsTheWalk) {
  EXPECT_EQ(pickle_overreach(std::string("\x80\x02\xff" "X\xff\xff\xff\x7f", 8)), std::nullopt);
}

// LibTorch's unpickler takes items and marks off its stack unchecked (a damaged data.pkl made it read
// before its stack): an opcode that takes more than the stack holds is found first.
TEST(PickleLengths, AnOpcodeTakingMoreThanTheStackHoldsIsFound) {
  EXPECT_EQ(pickle_overreach(std::string("\x80\x02\x85.", 4)), "an opcode at byte 2 that takes more items than the stack holds");
  EXPECT_EQ(pickle_overreach("\x80\x02K\x01t."), "an opcode at byte 4 that takes more items than the stack holds");  // TUPLE, no MARK
  EXPECT_EQ(pickle_overreach("\x80\x02(K\x01\x86t."), "an opcode at byte 5 that takes more items than the stack holds");  // TUPLE2 of one item
  EXPECT_EQ(pickle_overreach("\x80\x02(K\x01K\x02t\x85."), std::nullopt);  // MARK 1 2 TUPLE TUPLE1
}

}  // namespace
}  // namespace accel::train
