// Moving a finished checkpoint into place so that, whenever the process dies, `target` holds either the
// previous checkpoint or the new one, whole.
#pragma once

#include <string>

namespace accel::ckpt {

// Renames `staging` to `target`. When `target` exists, the two are exchanged atomically (Linux
// renameat2 RENAME_EXCHANGE) and the old checkpoint, now under `staging`, is removed. Throws Error(Io)
// naming both paths when the file system refuses.
void move_into_place(const std::string& staging, const std::string& target);

}  // namespace accel::ckpt
