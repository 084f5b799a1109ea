// A check LibTorch's zip reader leaves out: it allocates each record's uncompressed size, as the archive's
// central directory states it, before inflating the record, so an archive of 6 KB whose directory says a
// 350-byte deflated record holds 1.6 GB makes the loader allocate 1.6 GB (found by fuzz_model_load).
#pragma once

#include <caffe2/serialize/read_adapter_interface.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accel::train {

// The first record of the zip archive behind `archive` whose uncompressed size its compressed bytes cannot
// give: one claiming more compressed bytes than the archive holds, a stored record whose two sizes differ, a
// deflated one more than 1032 times its compressed size (deflate's largest expansion), or one of another
// method (which the reader cannot inflate, after allocating its size), as "record 'name' ..."; nullopt when
// there is none, and when no directory can be read (LibTorch's reader then refuses the archive itself). The
// records of both directories an archive may name are checked: the end record's and the zip64 end record's,
// which LibTorch's reader takes whenever it is there. Reads only the end of the archive and its central
// directories.
std::optional<std::string> oversized_zip_record(const caffe2::serialize::ReadAdapterInterface& archive);

// Where, in the archive behind `archive`, the last byte of each central-directory name ending with `suffix`
// is: the byte a reader changes to hide those records from the zip reader (which looks records up by their
// directory names). Empty when there are none, or the directory cannot be read.
std::vector<uint64_t> directory_name_ends(const caffe2::serialize::ReadAdapterInterface& archive,
                                          const std::string& suffix);

}  // namespace accel::train
