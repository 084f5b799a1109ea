// Every input committed to the model_load fuzz corpus (tests/fuzz/corpus/model_load/: the seeds, and each
// file that once crashed LibTorch's loader) is loaded or refused with accel's error, in the ordinary build
// too: a crash here is the process dying, which ctest reports.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"
#include "train/model/model.hpp"

namespace accel::train {
namespace {

std::vector<std::string> corpus_files() {
  std::vector<std::string> files;
  for (const std::string& name : list_directory(ACCEL_MODEL_CORPUS)) files.push_back(join_path(ACCEL_MODEL_CORPUS, name));
  return files;
}

TEST(ModelCorpus, EveryCommittedInputIsLoadedOrRefused) {
  const auto files = corpus_files();
  ASSERT_GE(files.size(), 10u) << "the corpus is missing";
  int loaded = 0, refused = 0;
  for (const std::string& path : files) {
    try {
      (void)Model::load_file(path);
      ++loaded;
    } catch (const Error& error) {
      ++refused;
      EXPECT_TRUE(error.code() == Code::InvalidArgument || error.code() == Code::Dtype) << path << ": " << error.what();
    }
  }
  EXPECT_GE(loaded, 2) << "the well-formed seeds load";
  EXPECT_GE(refused, 5) << "the damaged ones are refused";
}

}  // namespace
}  // namespace accel::train
