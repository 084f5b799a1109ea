// Names that end up in files other programs read (safetensors headers, checkpoint manifests, the trackers'
// JSONL and CSV) must be UTF-8: a standard JSON reader rejects anything else, so such a name is refused
// where it enters instead of making a file nobody else can open.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace accel {

// The offset of the first byte that does not start or continue a well-formed UTF-8 sequence (Unicode's
// table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), or nullopt when text is UTF-8.
std::optional<size_t> first_invalid_utf8(std::string_view text);

// The text with each byte of 0x80 and above, and each control byte, written as \xNN: printable whatever it
// holds, so that the message naming it is itself UTF-8.
std::string escaped_bytes(std::string_view text);

// Error(InvalidArgument) "<what> 'a\xff' is not UTF-8 (byte 0xff at offset 1)" unless text is UTF-8.
void require_utf8(std::string_view text, const std::string& what);

}  // namespace accel
