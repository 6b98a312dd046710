// Test helper: the real-model folders the end-to-end tests run over, their test sets, and a
// set's inputs.
//
// ModelDirs(): every folder of KILN_TEST_DATA_DIR (made by tests/e2e/make_package_testdata.py),
// plus every folder under each path in $KILN_MODEL_DIRS (':'-separated; .ci/run sets it to
// ../shared/models), that holds a model.onnx and a test_data_set_0/. Sorted by path; empty
// when neither has any (a test then says it is skipped and returns).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "kiln/tensor_files.h"
#include "kiln/runtime.h"

namespace kiln::testing {

inline std::vector<std::string> ModelDirs() {
  std::vector<std::string> parents = {KILN_TEST_DATA_DIR};
  if (const char* extra = std::getenv("KILN_MODEL_DIRS")) {
    std::string s = extra;
    for (size_t pos = 0; pos <= s.size();) {
      size_t colon = s.find(':', pos);
      std::string p = s.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      if (!p.empty()) parents.push_back(p);
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
  }
  std::vector<std::string> dirs;
  for (const std::string& parent : parents) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(parent, ec))
      if (std::filesystem::exists(e.path() / "model.onnx") && std::filesystem::exists(e.path() / "test_data_set_0"))
        dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// The folders test_data_set_0, test_data_set_1, ... of a model folder, in that order, up to
// the first number missing.
inline std::vector<std::string> TestSets(const std::string& model_dir) {
  std::vector<std::string> sets;
  for (int k = 0;; ++k) {
    const std::string set = model_dir + "/test_data_set_" + std::to_string(k);
    if (!std::filesystem::is_directory(set)) return sets;
    sets.push_back(set);
  }
}

// The inputs of `artifact`'s model read from a test set folder (input_N.pb or NAME.npy, as
// `kiln run --inputs` reads them), in the model's order.
inline std::vector<io::HostTensor> ReadInputs(const std::vector<uint8_t>& artifact, const std::string& set) {
  auto model = Model::Load(artifact);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  std::vector<std::string> names;
  for (const TensorInfo& t : model->inputs()) names.push_back(t.name);
  auto inputs = io::ReadInputDir(set, names);
  REQUIRE_MESSAGE(inputs.ok(), inputs.status().ToString());
  return std::move(*inputs);
}

}  // namespace kiln::testing
