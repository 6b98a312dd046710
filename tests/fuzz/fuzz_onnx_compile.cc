// Fuzz target: ONNX ModelProto bytes -> the importer and the whole compile for the CPU
// (`--arch none`: portable programs only, no NVRTC) -> artifact bytes. The compile may fail
// with a Status; it may not crash, leak or hang, and an artifact it does write must load
// (Model::Load verifies it): a compiler that writes an artifact its runtime refuses is a bug.
//
// The bytes go to model.onnx in a private temporary folder (CompileOnnxFile reads a path);
// external-data references resolve inside that folder, which holds nothing else.
// Seeds: ONNX backend node models and the real models (scripts/sanitize.sh gathers them).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "tests/native_target.h"

namespace {

// A private folder, removed at exit.
struct TempDir {
  std::string path = (std::filesystem::temp_directory_path() / "kiln_fuzz_compile_XXXXXX").string();
  TempDir() {
    if (::mkdtemp(path.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

const std::string& ModelPath() {
  static const TempDir dir;
  static const std::string path = dir.path + "/model.onnx";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = ModelPath();
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) std::abort();
  }
  kiln::compiler::CompileOptions options;
  options.archs.clear();
  options.cpu_targets = kiln::testing::NativeTargetForThisCpu();  // one image per input, the one that would run
  options.use_kernel_cache = false;
  options.jobs = 1;
  auto artifact = kiln::compiler::CompileOnnxFile(path, options, nullptr);
  if (!artifact.ok()) return 0;
  auto model = kiln::Model::Load(*artifact);
  if (!model.ok()) {
    std::fprintf(stderr, "compiled artifact does not load: %s\n", model.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
