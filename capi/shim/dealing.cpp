#include "accel/dealing.h"

#include "shim/entry_point.hpp"

using accel::capi::flag;

extern "C" int accel_dealer_new_shard(accel_dealer_t** out, int64_t batch_size, int drop_last, int64_t num_processes,
                                      int64_t process_index, int split_batches, int even_batches) {
  return guarded_out(__func__, out, [&] {
    accel::require_argument(batch_size >= 0, "batch_size must not be negative (0: dynamic batch sizes), got " +
                                                 std::to_string(batch_size));
    const accel::data::BaseSampler base{batch_size == 0 ? std::nullopt : std::optional<int64_t>(batch_size),
                                        flag(drop_last, "drop_last")};
    const accel::data::ShardSpec spec{num_processes, process_index, flag(split_batches, "split_batches"),
                                      flag(even_batches, "even_batches")};
    *out = new accel_dealer{{}, accel::data::make_shard_dealer(base, spec), {}};
  });
}

extern "C" int accel_dealer_new_iterable(accel_dealer_t** out, int64_t batch_size, int drop_last, int64_t num_processes,
                                         int64_t process_index, int split_batches) {
  return guarded_out(__func__, out, [&] {
    const accel::data::IterableShardSpec spec{batch_size, flag(drop_last, "drop_last"), num_processes, process_index,
                                              flag(split_batches, "split_batches")};
    *out = new accel_dealer{{}, accel::data::make_iterable_dealer(spec), {}};
  });
}

extern "C" int accel_dealer_new_dispatch(accel_dealer_t** out, int64_t num_processes, int64_t process_index,
                                         int split_batches, int drop_last) {
  return guarded_out(__func__, out, [&] {
    const accel::data::DispatchSpec spec{num_processes, process_index, flag(split_batches, "split_batches"),
                                         flag(drop_last, "drop_last")};
    *out = new accel_dealer{{}, accel::data::make_dispatch_dealer(spec), {}};
  });
}

extern "C" void accel_dealer_free(accel_dealer_t* dealer) { release(__func__, dealer); }

extern "C" int accel_dealer_push(accel_dealer_t* dealer, const int64_t* indices, size_t count) {
  return guarded(__func__, [&] {
    require(dealer, "dealer");
    if (count > 0) require(indices, "indices");
    dealer->dealer->push(accel::data::Batch(indices, indices + count));
  });
}

extern "C" int accel_dealer_finish(accel_dealer_t* dealer) {
  return guarded(__func__, [&] {
    require(dealer, "dealer");
    dealer->dealer->finish();
  });
}

extern "C" int accel_dealer_next(accel_dealer_t* dealer, const int64_t** indices, size_t* count, int* has_batch) {
  return guarded(__func__, [&] {
    require(dealer, "dealer");
    require(indices, "indices");
    require(count, "count");
    require(has_batch, "has_batch");
    auto batch = dealer->dealer->next();
    dealer->handed_out = batch ? std::move(*batch) : accel::data::Batch{};
    *indices = dealer->handed_out.data();
    *count = dealer->handed_out.size();
    *has_batch = batch ? 1 : 0;
  });
}

extern "C" int accel_dealer_length(const accel_dealer_t* dealer, int64_t base_len, int64_t last_batch_size,
                                   int64_t* out) {
  return guarded(__func__, [&] {
    require(dealer, "dealer");
    require(out, "out");
    *out = dealer->dealer->length(base_len, last_batch_size);
  });
}

extern "C" int accel_dealer_remainder(const accel_dealer_t* dealer, int64_t* out) {
  return guarded(__func__, [&] {
    require(dealer, "dealer");
    require(out, "out");
    *out = dealer->dealer->remainder();
  });
}
