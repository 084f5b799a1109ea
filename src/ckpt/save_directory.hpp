// The directory a save is asked for, checked before anything is written: a checkpoint is moved into place
// by renaming its staging folder, which no rename can do to the working directory, and a failure found
// only at that rename would throw away a whole checkpoint's writing.
#pragma once

#include <string>

namespace accel::ckpt {

// `directory` without its trailing slashes ("ckpt/" and "ckpt//" are "ckpt"), as save_state and the
// background save stage and rename it. Throws Error(InvalidArgument) naming it for "" and for a path whose
// last name is "." or ".." or that is the root ("./", "runs/..", "/"): a directory that cannot be
// replaced by a rename.
std::string checkpoint_directory(const std::string& directory);

// `directory` without its trailing slashes, for save_model, which writes into the directory itself (the
// working directory included). Throws Error(InvalidArgument) for "".
std::string model_directory(const std::string& directory);

}  // namespace accel::ckpt
