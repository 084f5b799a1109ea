// A check LibTorch 1.13's loader leaves out: a code record's source ranges (code/**/*.py.debug_pkl), which
// it unpickles only to word an error message, are indexed without bounds checks, so a damaged one crashes
// the process while an error about the code is being reported (found by fuzz_model_load). This unpickles
// such a record and checks its shape before LibTorch reads it.
#pragma once

#include <optional>
#include <string>

namespace accel::train {

// What is wrong with `pickle`, a debug record, where LibTorch 1.13 would read past what it holds: not a
// pickle, not the tuple of (byte offset, source range) entries (optionally behind a
// "FORMAT_WITH_STRING_TABLE" marker and a table of texts), a source range that is not (source, start, end),
// a source that is not (text or text indices, file name, line), or an index outside the text table.
// nullopt when the record can be read.
std::optional<std::string> malformed_debug_record(const std::string& pickle);

}  // namespace accel::train
