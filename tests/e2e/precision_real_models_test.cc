// Every real model (tests/e2e/model_dirs.h) compiled with float16 and with bfloat16
// activations (`kiln compile --precision`, compiler/passes/precision.h), fused (generated
// kernels, run by the portable interpreter) and unfused (every op a CPU kernel), and run on
// the CPU backend, against the same model compiled in float32, on every test set's inputs
// (the real inputs: images, chunks of speech). Each output is held to its rule
// (tests/e2e/precision_rules.h, which gives the reasons); the figures of every model and
// output are printed (doctest MESSAGE) whether they pass or not, so a run of this case alone
// shows how much accuracy each model loses, and written to precision_figures.txt beside the
// test data (KILN_TEST_DATA_DIR's parent: build/), which scripts/test.sh prints after ctest.
//
// The reference is Kiln's own float32 result, not onnxruntime's: the question here is what
// the precision stage costs, and the float32 artifact's agreement with onnxruntime is
// tests/e2e/run_model_dir.py's (e2e_package_models, .ci/run).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/cpu_reference.h"
#include "tests/e2e/model_dirs.h"
#include "tests/e2e/precision_rules.h"

namespace {

using kiln::io::HostTensor;
using kiln::passes::Precision;
using namespace kiln::testing;

std::vector<uint8_t> CompileAt(const std::string& dir, Precision precision, bool fuse) {
  kiln::compiler::CompileOptions options = CpuOnly();
  options.precision.precision = precision;
  options.fuse = fuse;
  auto bytes = kiln::compiler::CompileOnnxFile(dir + "/model.onnx", options, nullptr);
  REQUIRE_MESSAGE(bytes.ok(), std::string(kiln::passes::PrecisionName(precision)) << (fuse ? "" : " unfused") << ": "
                                                                  << bytes.status().ToString());
  return std::move(*bytes);
}

// The artifact's outputs on the inputs in `set` (a test_data_set_N folder), run by the CPU
// backend.
std::vector<HostTensor> RunTestSet(const std::vector<uint8_t>& artifact, const std::string& set) {
  auto model = kiln::Model::Load(artifact);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  return RunCpuReference(*model, ReadInputs(artifact, set));
}

// The figures file (see the top of this file), emptied when `restart`.
std::ofstream& FiguresFile(bool restart = false) {
  static std::ofstream out;
  if (restart || !out.is_open()) {
    out.close();
    out.open(std::filesystem::path(KILN_TEST_DATA_DIR).parent_path() / "precision_figures.txt", std::ios::trunc);
  }
  return out;
}

void CheckModel(const std::string& dir) {
  const std::string model = std::filesystem::path(dir).filename().string();
  const std::vector<std::string> sets = TestSets(dir);
  const std::vector<uint8_t> fp32 = CompileAt(dir, Precision::kFp32, true);
  std::vector<std::vector<HostTensor>> reference;
  for (const std::string& set : sets) reference.push_back(RunTestSet(fp32, set));
  for (Precision precision : {Precision::kFp16, Precision::kBf16}) {
    for (bool fuse : {true, false}) {
      const std::string name = std::string(kiln::passes::PrecisionName(precision)) + (fuse ? "" : " unfused");
      const std::vector<uint8_t> artifact = CompileAt(dir, precision, fuse);
      for (size_t s = 0; s < sets.size(); ++s) {
        const std::vector<HostTensor> got = RunTestSet(artifact, sets[s]);
        REQUIRE(got.size() == reference[s].size());
        for (size_t o = 0; o < got.size(); ++o) {
          const std::string label = model + " set " + std::to_string(s) + " " + name + " output " + std::to_string(o) +
                                    " '" + reference[s][o].name + "'";
          INFO(label);
          const Rule rule = RuleFor(model, static_cast<int>(o));
          const Figures f = Compare(got[o], reference[s][o]);
          const std::string line = label + ": " + Describe(f, rule, Bound(rule, precision));
          MESSAGE(line);
          FiguresFile() << "  " << line << "\n" << std::flush;
          CheckFigures(f, rule, Bound(rule, precision));
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("precision rules: a classifier's argmax is checked on rows with a clear winner, near-ties left to the cosine") {
  const auto tensor = [](std::vector<float> v) {
    HostTensor t;
    t.dtype = kiln::DType::kFloat32;
    t.dims = {3, 3};
    const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
    t.bytes.assign(bytes, bytes + v.size() * sizeof(float));
    return t;
  };
  // max |reference| 0.9; bfloat16's near-tie bound 0.05 * 0.9 = 0.045. Row 0 is a near-tie
  // (margin 0.02), rows 1 and 2 have clear winners (margins 0.85 and 0.1).
  const HostTensor ref = tensor({0.50f, 0.48f, 0.02f, 0.90f, 0.05f, 0.05f, 0.30f, 0.40f, 0.30f});
  const Rule rule = RuleFor("ppocr-cls-mobile-v2", 0);
  REQUIRE(rule.metric == Metric::kArgmax);
  const double bound = Bound(rule, Precision::kBf16);
  // The near-tie swapped by an error of 0.011: not counted against the artifact.
  Figures f = Compare(tensor({0.489f, 0.491f, 0.02f, 0.90f, 0.05f, 0.05f, 0.30f, 0.40f, 0.30f}), ref);
  ClearRows c = CountClearRows(f, bound);
  CHECK(c.clear == 2);
  CHECK(c.agree == 2);
  CHECK(f.min_margin == doctest::Approx(0.02).epsilon(1e-5));
  CHECK(Describe(f, rule, bound).find("argmax agrees on 2 of 2 rows (1 near-ties left to the cosine)") !=
        std::string::npos);
  // A clear winner lost (row 2: 0.40 -> 0.29) is.
  f = Compare(tensor({0.50f, 0.48f, 0.02f, 0.90f, 0.05f, 0.05f, 0.30f, 0.29f, 0.30f}), ref);
  c = CountClearRows(f, bound);
  CHECK(c.clear == 2);
  CHECK(c.agree == 1);
}

TEST_CASE("precision: every real model in fp16 and bf16 on the CPU backend agrees with its fp32 artifact") {
  FiguresFile(/*restart=*/true);
  const std::vector<std::string> dirs = ModelDirs();
  if (dirs.empty()) {
    MESSAGE("skipped: no model folders in " << KILN_TEST_DATA_DIR << " or $KILN_MODEL_DIRS (run scripts/test.sh)");
    return;
  }
  // One subcase per model, so that a model that fails to compile or run does not hide the
  // figures of the others.
  for (const std::string& dir : dirs) {
    SUBCASE(std::filesystem::path(dir).filename().string().c_str()) {
      CAPTURE(dir);
      CheckModel(dir);
    }
  }
}
