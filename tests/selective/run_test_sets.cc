// run_test_sets: an artifact on ONNX test sets, each output against its reference, through the
// shared libkiln_runtime.so only (scripts/selective.sh runs it on a selective runtime, which has
// no kiln-run: that tool's CLI11, fmt and JSON cost a small build more than this whole check).
//
//   run_test_sets MODEL.kiln [--threads N] TEST_SET_DIR...
//
// Each TEST_SET_DIR holds input_N.pb and output_N.pb (tests/e2e/make_package_testdata.py). Every
// output must pass numpy.allclose(got, want, rtol=1e-3, atol=1e-4), as tests/e2e and kiln-run's
// --expected judge (tools/io/compare.h). Prints one line per output of each set. Exit status: 0 every
// output matches; 1 a mismatch, or the runtime refused (its Status is printed: loading an artifact
// that needs a CPU kernel this runtime lacks fails here); 2 a bad command line or test set.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/tensor_files.h"
#include "tools/io/compare.h"

namespace {

constexpr double kAtol = 1e-4, kRtol = 1e-3;

std::vector<std::string> Names(const std::vector<kiln::TensorInfo>& infos) {
  std::vector<std::string> names;
  for (const kiln::TensorInfo& t : infos) names.push_back(t.name);
  return names;
}

// 0 every output of the set matches, 1 one does not or the run failed, 2 the set is unreadable.
int RunSet(const kiln::Model& model, kiln::ExecutionContext& ctx, const std::string& dir) {
  auto inputs = kiln::io::ReadInputDir(dir, Names(model.inputs()));
  auto expected = kiln::io::ReadOutputDir(dir, Names(model.outputs()));
  if (!inputs.ok() || !expected.ok()) {
    std::printf("%s: %s\n", dir.c_str(), (inputs.ok() ? expected.status() : inputs.status()).ToString().c_str());
    return 2;
  }
  std::vector<kiln::TensorView> views, outputs;
  for (const kiln::io::HostTensor& t : *inputs) views.push_back(t.view());
  if (kiln::Status s = ctx.Run(views, outputs); !s.ok()) {
    std::printf("%s: run: %s\n", dir.c_str(), s.ToString().c_str());
    return 1;
  }
  int rc = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const kiln::io::HostTensor got = kiln::io::HostTensor::FromView((*expected)[i].name, outputs[i]);
    const kiln::io::Comparison c = kiln::io::CompareTensors((*expected)[i], got, kAtol, kRtol);
    std::printf("%s: %s\n", dir.c_str(), c.line.c_str());
    if (!c.match) rc = 1;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> sets;
  kiln::ContextOptions options;
  options.device = kiln::Device::kCpu;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      options.cpu.threads = std::atoi(argv[++i]);
    } else {
      sets.push_back(arg);
    }
  }
  if (argc < 3 || sets.empty()) {
    std::fprintf(stderr, "usage: run_test_sets MODEL.kiln [--threads N] TEST_SET_DIR...\n");
    return 2;
  }
  auto model = kiln::Model::Load(argv[1]);
  if (!model.ok()) {
    std::printf("%s: %s\n", argv[1], model.status().ToString().c_str());
    return 1;
  }
  auto ctx = kiln::ExecutionContext::Create(*model, options);
  if (!ctx.ok()) {
    std::printf("%s: %s\n", argv[1], ctx.status().ToString().c_str());
    return 1;
  }
  int rc = 0;
  for (const std::string& dir : sets) rc = std::max(rc, RunSet(*model, *ctx, dir));
  return rc;
}
