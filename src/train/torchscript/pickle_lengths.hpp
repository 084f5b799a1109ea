// A check LibTorch's unpickler leaves out: it allocates what an opcode announces before it reads it, so a
// pickle of 300 bytes that announces a string of 2 GB makes the loader allocate 2 GB, and one that stores
// into memo slot 1,668,575,489 makes it allocate 27 GB for the memo (both found by fuzz_model_load). And it
// takes items and marks off its stack without checking they are there, reading before the stack (found
// the same way). This walks a pickle's opcodes and finds such an argument or opcode before LibTorch does.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace accel::train {

// The first argument in `pickle` that announces more than the pickle can hold: a length-prefixed string,
// bytes or long longer than the bytes that follow it ("an argument of N bytes at byte K, but M bytes
// follow"), or a memo index (PUT, GET and their binary forms) larger than the pickle's size, which bounds
// the number of memo slots a real pickle fills ("memo index N at byte K, beyond the M slots a pickle of M
// bytes can fill"), or an opcode that takes more items (or a mark) than the stack holds ("an opcode at
// byte K that takes more items than the stack holds"); nullopt when there is none. It walks the opcodes of pickle protocols 0 to 5 up to
// STOP; at an opcode it does not know it stops looking, leaving the rest to the unpickler.
std::optional<std::string> pickle_overreach(const std::string& pickle);

}  // namespace accel::train
