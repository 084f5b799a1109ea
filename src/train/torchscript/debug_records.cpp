#include "train/torchscript/debug_records.hpp"

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdint>
#include <vector>

namespace accel::train {

namespace {

// Whether a source is one LibTorch reads (else `problem` says why). Its ranges may reach past its text:
// torch.jit.save writes sources whose text it left out.
bool readable_source(const c10::IValue& source, int64_t texts, std::string& problem) {
  if (!source.isTuple() || source.toTupleRef().elements().size() != 3) {
    problem = "a source that is not (text, file name, line)";
    return false;
  }
  const auto& parts = source.toTupleRef().elements();
  if (!parts[2].isInt()) {
    problem = "a source whose line is not an integer";
    return false;
  }
  const auto in_table = [&](const c10::IValue& index) {
    return index.isInt() && index.toInt() >= 0 && index.toInt() < texts;
  };
  if (texts == 0) {
    if (!parts[0].isString() || !(parts[1].isNone() || parts[1].isString())) {
      problem = "a source whose text or file name is not a string";
      return false;
    }
    return true;
  }
  if (!parts[0].isIntList() || !in_table(parts[1])) {
    problem = "a source whose text indices or file name index are not in the text table";
    return false;
  }
  for (const int64_t index : parts[0].toIntList()) {
    if (index < 0 || index >= texts) {
      problem = "a text index " + std::to_string(index) + " outside the table of " + std::to_string(texts);
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<std::string> malformed_debug_record(const std::string& pickle) {
  c10::IValue value;
  try {
    value = torch::jit::unpickle(pickle.data(), pickle.size());
  } catch (const std::exception& error) {
    return std::string("is not a pickle LibTorch reads: ") + error.what();
  }
  if (!value.isTuple()) return "is not a tuple of source ranges";
  const auto& top = value.toTupleRef().elements();
  int64_t texts = 0;  // entries in the text table (none: each source holds its text)
  std::vector<c10::IValue> entries(top.begin(), top.end());
  if (!top.empty() && top[0].isString() && top[0].toStringRef() == "FORMAT_WITH_STRING_TABLE") {
    if (top.size() < 3 || !top[1].isTuple() || !top[2].isTuple()) return "has a text table marker without its table and entries";
    for (const auto& text : top[1].toTupleRef().elements()) {
      if (!text.isString()) return "has a text table entry that is not a string";
      ++texts;
    }
    const auto& listed = top[2].toTupleRef().elements();
    entries.assign(listed.begin(), listed.end());
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string where = "entry " + std::to_string(i);
    if (!entries[i].isTuple() || entries[i].toTupleRef().elements().size() < 2) return where + " is not (byte offset, source range)";
    const auto& entry = entries[i].toTupleRef().elements();
    if (!entry[0].isInt()) return where + "'s byte offset is not an integer";
    if (!entry[1].isTuple() || entry[1].toTupleRef().elements().size() != 3) return where + "'s source range is not (source, start, end)";
    const auto& range = entry[1].toTupleRef().elements();
    std::string problem;
    if (!readable_source(range[0], texts, problem)) return where + " has " + problem;
    if (!range[1].isInt() || !range[2].isInt()) return where + "'s range does not start and end at integers";
  }
  return std::nullopt;
}

}  // namespace accel::train
