#include "train/torchscript/pickle_lengths.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace accel::train {

namespace {

// How an opcode's argument is laid out.
enum class Argument {
  None,
  Fixed,          // `size` bytes
  Counted,        // a little-endian length of `size` bytes, then that many bytes
  Line,           // text up to a newline
  TwoLines,       // GLOBAL and INST: module and name, each up to a newline
  Unknown,
};

struct Layout {
  Argument argument;
  size_t size;
};

Layout layout_of(unsigned char op) {
  switch (op) {
    case '(': case '.': case '0': case '1': case '2': case 'N': case 'R': case 'a': case 'b': case 'd': case '}':
    case 'e': case 'l': case ']': case 'o': case 's': case 'u': case 't': case ')': case 'Q':
    case 0x81: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90: case 0x91: case 0x92:
    case 0x93: case 0x94: case 0x97: case 0x98:
      return {Argument::None, 0};
    case 'K': case 'q': case 'h': case 0x80: case 0x82: return {Argument::Fixed, 1};
    case 'M': case 0x83: return {Argument::Fixed, 2};
    case 'J': case 'j': case 'r': case 0x84: return {Argument::Fixed, 4};
    case 'G': case 0x95: return {Argument::Fixed, 8};
    case 'U': case 'C': case 0x8c: case 0x8a: return {Argument::Counted, 1};
    case 'X': case 'B': case 'T': case 0x8b: return {Argument::Counted, 4};
    case 0x8d: case 0x8e: case 0x96: return {Argument::Counted, 8};
    case 'I': case 'L': case 'F': case 'S': case 'V': case 'P': case 'g': case 'p': return {Argument::Line, 0};
    case 'c': case 'i': return {Argument::TwoLines, 0};
    default: return {Argument::Unknown, 0};
  }
}

uint64_t little_endian(const std::string& bytes, size_t at, size_t size) {
  uint64_t value = 0;
  for (size_t i = size; i-- > 0;) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

// BINPUT, BINGET, LONG_BINPUT, LONG_BINGET: their argument is a memo slot.
bool is_memo_index(unsigned char op) { return op == 'q' || op == 'h' || op == 'r' || op == 'j'; }

// Every memo slot a pickle fills costs it at least two bytes, so an index beyond its size is no real one.
std::optional<std::string> memo_overreach(uint64_t index, size_t at, size_t size) {
  if (index < size) return std::nullopt;
  return "memo index " + std::to_string(index) + " at byte " + std::to_string(at) + ", beyond the " +
         std::to_string(size) + " slots a pickle of " + std::to_string(size) + " bytes can fill";
}

// The unpickler's stack as the opcodes move it: how many items it holds, and where each MARK left it.
// LibTorch 1.13's unpickler takes items and marks without checking that they are there (a damaged
// data.pkl made it read before its stack: fuzz_model_load).
class StackDepth {
 public:
  // False when `op` takes more items, or a mark, than the stack holds.
  bool apply(unsigned char op) {
    switch (op) {
      case '(': marks_.push_back(depth_); return true;
      case '1': return to_mark(0);                               // POP_MARK
      case 'd': case 'l': case 't': case 'i': case 0x91:         // DICT, LIST, TUPLE, INST, FROZENSET
        return to_mark(0) && push(1);
      case 'o': return to_mark(1) && push(1);                    // OBJ: the class after the mark
      case 'e': case 'u': case 0x90: return to_mark(0) && depth_ >= 1;  // APPENDS, SETITEMS, ADDITEMS: onto the item below
      case '0': return take(1, 0);                               // POP
      case '2': return take(1, 2);                               // DUP
      case 'Q': case 0x85: return take(1, 1);                    // BINPERSID, TUPLE1
      case 'p': case 'q': case 'r': case 0x94: return take(1, 1);  // PUT, BINPUT, LONG_BINPUT, MEMOIZE
      case 'R': case 'a': case 'b': case 0x81: case 0x86: case 0x93:  // REDUCE, APPEND, BUILD, NEWOBJ, TUPLE2, STACK_GLOBAL
        return take(2, 1);
      case 's': case 0x87: case 0x92: return take(3, 1);          // SETITEM, TUPLE3, NEWOBJ_EX
      case '.': case 0x80: case 0x95: return true;               // STOP, PROTO, FRAME
      default: return push(1);                                   // every other known opcode pushes one item
    }
  }

 private:
  bool take(size_t items, size_t pushed) {
    if (depth_ < items) return false;
    depth_ -= items;
    return push(pushed);
  }
  bool push(size_t items) {
    depth_ += items;
    return true;
  }
  // The items after the last mark are taken (at least `at_least` of them), and the mark.
  bool to_mark(size_t at_least) {
    if (marks_.empty() || marks_.back() + at_least > depth_) return false;
    depth_ = marks_.back();
    marks_.pop_back();
    return true;
  }

  size_t depth_ = 0;
  std::vector<size_t> marks_;
};

}  // namespace

std::optional<std::string> pickle_overreach(const std::string& pickle) {
  size_t at = 0;
  StackDepth stack;
  while (at < pickle.size()) {
    const unsigned char op = static_cast<unsigned char>(pickle[at]);
    const Layout layout = layout_of(op);
    const size_t argument = at + 1;
    if (layout.argument != Argument::Unknown && !stack.apply(op)) {
      return "an opcode at byte " + std::to_string(at) + " that takes more items than the stack holds";
    }
    switch (layout.argument) {
      case Argument::Unknown:
        return std::nullopt;
      case Argument::None:
        if (op == '.') return std::nullopt;  // STOP
        at = argument;
        break;
      case Argument::Fixed:
        if (argument + layout.size > pickle.size()) return std::nullopt;
        if (is_memo_index(op)) {
          if (const auto problem = memo_overreach(little_endian(pickle, argument, layout.size), at, pickle.size())) {
            return problem;
          }
        }
        at = argument + layout.size;
        break;
      case Argument::Line:
      case Argument::TwoLines: {
        size_t end = pickle.find('\n', argument);
        if (end != std::string::npos && layout.argument == Argument::TwoLines) end = pickle.find('\n', end + 1);
        if (end == std::string::npos) return std::nullopt;  // truncated: the unpickler's to refuse
        if (op == 'p' || op == 'g') {
          const std::string digits = pickle.substr(argument, end - argument);
          if (!digits.empty() && digits.size() <= 19 && digits.find_first_not_of("0123456789") == std::string::npos) {
            if (const auto problem = memo_overreach(std::stoull(digits), at, pickle.size())) return problem;
          }
        }
        at = end + 1;
        break;
      }
      case Argument::Counted: {
        if (argument + layout.size > pickle.size()) return std::nullopt;
        const uint64_t length = little_endian(pickle, argument, layout.size);
        const size_t follow = pickle.size() - argument - layout.size;
        if (length > follow) {
          return "an argument of " + std::to_string(length) + " bytes at byte " + std::to_string(at) + ", but " +
                 std::to_string(follow) + " bytes follow";
        }
        at = argument + layout.size + static_cast<size_t>(length);
        break;
      }
    }
  }
  return std::nullopt;
}

}  // namespace accel::train
