#include "ckpt/save_model.hpp"

#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "formats/safetensors.hpp"

namespace accel::ckpt {

void save_model(distributed::State& state, const train::Model& model, const std::string& directory) {
  const timeline::Span span("save_model");
  if (state.launch().rank == 0) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) fail(Code::Io, "cannot create directory '" + directory + "': " + error.message());
    auto tensors = model.named_parameters();
    for (auto& buffer : model.named_buffers()) tensors.push_back(std::move(buffer));
    formats::write_safetensors((std::filesystem::path(directory) / "model.safetensors").string(), tensors);
  }
  state.wait_for_everyone();
}

}  // namespace accel::ckpt
