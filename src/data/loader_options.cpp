#include "data/loader_options.hpp"

#include "core/error.hpp"

namespace accel::data {

LoaderConfig loader_config(const Options* explicit_options) {
  const auto options = resolve_options(loader_option_scope(), explicit_options);
  LoaderConfig config;
  config.batch_size = options.get_int("batch_size");
  config.shuffle = options.get_bool("shuffle");
  config.drop_last = options.get_bool("drop_last");
  config.split_batches = options.get_bool("split_batches");
  config.even_batches = options.get_bool("even_batches");
  if (const auto& dispatch = options.get_string("dispatch_batches"); dispatch != "auto") {
    config.dispatch_batches = dispatch == "true";
  }
  config.already_sharded = options.get_bool("already_sharded");
  config.use_seedable_sampler = options.get_bool("use_seedable_sampler");
  if (const int64_t seed = options.get_int("data_seed"); seed >= 0) config.data_seed = static_cast<uint64_t>(seed);
  config.device_placement = options.get_bool("device_placement");
  config.non_blocking = options.get_bool("non_blocking");
  config.pin_memory = options.get_bool("pin_memory");
  config.prefetch_threads = options.get_int("prefetch_threads");
  if (config.prefetch_threads < 0 || config.prefetch_threads > 256) {
    fail(Code::BadOptionValue, "option 'prefetch_threads': " + std::to_string(config.prefetch_threads) +
                                   " is outside [0, 256]");
  }
  config.prefetch_depth = options.get_int("prefetch_depth");
  return config;
}

}  // namespace accel::data
