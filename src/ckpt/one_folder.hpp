// A checkpoint is one folder that every process writes its part into (and reads its part from): folders
// that differ between the processes (a per-process temporary folder, a name with the rank or the time in
// it) would leave each holding a part of a checkpoint that no process can load.
#pragma once

#include <string>

#include "distributed/state.hpp"

namespace accel::ckpt {

// Collective: throws Error(InvalidArgument) on every process alike when the processes name different folders
// (compared as absolute paths), naming each process's; `operation` ("save_state") starts the message. With
// `model_files` (save_state: how each model is written, "whole" or "pieces" by model), also when those differ:
// a model written whole by some processes and in pieces by others (each process chose its checkpoint_model)
// would be neither.
void require_one_folder(distributed::State& state, const std::string& directory, const char* operation,
                        const std::string& model_files = "");

}  // namespace accel::ckpt
