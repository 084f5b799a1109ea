#include "ckpt/save_model.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/timeline.hpp"
#include "formats/safetensors.hpp"

namespace accel::ckpt {

void save_model(distributed::State& state, const train::Model& model, const std::string& directory) {
  const timeline::Span span("save_model");
  if (state.launch().rank == 0) {
    create_directories(directory);
    formats::write_safetensors(join_path(directory, "model.safetensors"),
                               model.parameters_and_buffers());
  }
  state.wait_for_everyone();
}

}  // namespace accel::ckpt
