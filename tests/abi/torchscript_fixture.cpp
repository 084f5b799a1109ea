// The entry-point test's TorchScript model (tiny_models' MLP), written from C: the runner is a C program.
#include <exception>

#include "tiny_models.hpp"

extern "C" int write_tiny_torchscript(const char* path) {
  try {
    tiny_models::mlp(path);
    return 1;
  } catch (const std::exception&) {
    return 0;
  }
}
