// A check LibTorch 1.13's source importer leaves out: it reads a class body's statements assuming the
// shapes its own printer writes, and a statement of another shape makes it read a tree that is not there
// and crash (a class constant `x = 1` without its `: Final[T]`, found by fuzz_model_load). This parses a
// code record as the importer does and finds such a statement first.
#pragma once

#include <optional>
#include <string>

namespace accel::train {

// The first class-body statement in `code` (a TorchScript archive's code/*.py record, named `record`) that
// LibTorch 1.13's importer would read past its end, described with the class and the line; nullopt when
// there is none, and when `code` does not parse (the importer then reports that itself). What each kind of
// class must hold, as the importer reads it: a NamedTuple's statements are annotated fields (`x : T`, with
// or without a default), an Enum's are assignments (`X = 1`); in other classes (modules, interfaces) an
// assignment to a name is annotated (`x : Final[int] = 1`), but for __parameters__, __buffers__,
// __forward_pre_hooks__ and __forward_hooks__, which hold a value.
std::optional<std::string> unimportable_class_statement(const std::string& code, const std::string& record);

}  // namespace accel::train
