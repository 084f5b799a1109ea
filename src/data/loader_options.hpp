// The loader's settings (Accelerate's DataLoaderConfiguration and DataLoader arguments): their keys,
// defaults and validation, and the LoaderConfig they make.
#pragma once

#include "core/options.hpp"
#include "data/loader.hpp"

namespace accel::data {

const OptionScope& loader_option_scope();

// Resolves explicit_options (NULL: the defaults) against the loader's keys. Throws Error(UnknownOption)
// for another object's key, Error(BadOptionValue) for a value out of range.
LoaderConfig loader_config(const Options* explicit_options);

}  // namespace accel::data
