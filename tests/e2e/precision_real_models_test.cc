// Every real model (tests/e2e/model_dirs.h) compiled with float16 and with bfloat16
// activations (`kiln compile --precision`, compiler/passes/precision.h) and run on the CPU
// backend, against the same model compiled in float32, on its test_data_set_0 inputs (the
// real inputs: an image, a chunk of speech). Each output is held to its rule in kRules;
// the figures of every model and output are printed (doctest MESSAGE) whether they pass or
// not, so a run of this case alone shows how much accuracy each model loses.
//
// The reference is Kiln's own float32 result, not onnxruntime's: the question here is what
// the precision stage costs, and the float32 artifact's agreement with onnxruntime is
// tests/e2e/run_model_dir.py's (e2e_package_models, .ci/run).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/io/tensor_io.h"
#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/e2e/model_dirs.h"

namespace {

using kiln::DType;
using kiln::io::HostTensor;
using kiln::passes::Precision;

enum class Metric {
  kCosine,    // cosine similarity of the whole output with float32's >= the bound
  kArgmax,    // each row along the last axis has its largest element where float32's has
  kAbsolute,  // max |x - x_fp32| <= the bound
};

struct Rule {
  const char* model;  // the folder's name
  int output;         // index in the model's outputs
  Metric metric;
  double fp16, bf16;  // the bound in each precision (unused for kArgmax)
};

// Outputs not listed here are held to cosine >= 0.999 in both precisions (the bar
// for a model that is not a classifier): the detectors' maps and boxes, the super-resolution
// image, the sine MLP, Silero VAD's LSTM state.
constexpr Rule kRules[] = {
    // Classifiers: the class is the result, so its index must agree on every row (one digit,
    // three text lines). Their logits and probabilities also meet cosine >= 0.999 (printed).
    {"mnist-8", 0, Metric::kArgmax, 0, 0},
    {"ppocr-cls-mobile-v2", 0, Metric::kArgmax, 0, 0},
    {"ch_ppocr_mobile_v2.0_cls", 0, Metric::kArgmax, 0, 0},
    // Silero VAD's speech probability, shape [batch, 1]: one number per chunk, so a cosine is
    // 1 whatever it is. Its users compare it with a threshold (0.5 by default, with a 0.15
    // hysteresis), so an absolute error is what matters: 0.01 is well inside the hysteresis.
    // The encoder runs in the lower precision, the LSTM in float32; bfloat16's 8-bit
    // significand (unit roundoff 2^-8 vs float16's 2^-11) gets twice the budget.
    {"silero-vad-v6-16k-op15", 0, Metric::kAbsolute, 0.01, 0.02},
    {"silero_vad_16k_op15", 0, Metric::kAbsolute, 0.01, 0.02},
};

Rule RuleFor(const std::string& model, int output) {
  for (const Rule& r : kRules)
    if (model == r.model && output == r.output) return r;
  return {"", output, Metric::kCosine, 0.999, 0.999};
}

// How one output of the lower precision compares with float32's.
struct Figures {
  double cosine = 0;
  double max_abs_diff = 0;
  double max_abs_ref = 0;
  int64_t non_finite = 0;        // elements not finite here that are finite in float32
  int64_t rows = 0, agree = 0;   // argmax along the last axis
  double min_margin = INFINITY;  // the smallest gap between float32's two largest of a row
};

const float* Floats(const HostTensor& t) { return reinterpret_cast<const float*>(t.bytes.data()); }

Figures Compare(const HostTensor& got, const HostTensor& ref) {
  Figures f;
  const int64_t n = ref.num_elements();
  const float* g = Floats(got);
  const float* r = Floats(ref);
  double dot = 0, gg = 0, rr = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(g[i]) && std::isfinite(r[i])) ++f.non_finite;
    dot += static_cast<double>(g[i]) * r[i];
    gg += static_cast<double>(g[i]) * g[i];
    rr += static_cast<double>(r[i]) * r[i];
    f.max_abs_diff = std::max(f.max_abs_diff, std::fabs(static_cast<double>(g[i]) - r[i]));
    f.max_abs_ref = std::max(f.max_abs_ref, std::fabs(static_cast<double>(r[i])));
  }
  // Two all-zero outputs are the same; one zero and one not are as far apart as they get.
  f.cosine = gg == 0 && rr == 0 ? 1.0 : gg == 0 || rr == 0 ? 0.0 : dot / std::sqrt(gg * rr);
  const int64_t width = ref.dims.empty() ? 1 : ref.dims.back();
  if (width > 0) {
    f.rows = n / width;
    for (int64_t row = 0; row < f.rows; ++row) {
      const float* gr = g + row * width;
      const float* rf = r + row * width;
      int64_t gi = 0, ri = 0;
      for (int64_t j = 1; j < width; ++j) {
        if (gr[j] > gr[gi]) gi = j;
        if (rf[j] > rf[ri]) ri = j;
      }
      double second = -INFINITY;
      for (int64_t j = 0; j < width; ++j)
        if (j != ri) second = std::max(second, static_cast<double>(rf[j]));
      f.min_margin = std::min(f.min_margin, rf[ri] - second);
      if (gi == ri) ++f.agree;
    }
  }
  return f;
}

std::vector<uint8_t> Compile(const std::string& dir, Precision precision) {
  kiln::compiler::CompileOptions options = kiln::testing::CpuOnly();
  options.precision.precision = precision;
  auto bytes = kiln::compiler::CompileOnnxFile(dir + "/model.onnx", options, nullptr);
  REQUIRE_MESSAGE(bytes.ok(), std::string(kiln::passes::PrecisionName(precision)) << ": " << bytes.status().ToString());
  return std::move(*bytes);
}

// The artifact's outputs on the test set's inputs, run by the CPU backend.
std::vector<HostTensor> Run(const std::vector<uint8_t>& artifact, const std::string& dir) {
  auto model = kiln::Model::Load(artifact);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  std::vector<std::string> names;
  for (const kiln::TensorInfo& t : model->inputs()) names.push_back(t.name);
  auto inputs = kiln::io::ReadInputDir(dir + "/test_data_set_0", names);
  REQUIRE_MESSAGE(inputs.ok(), inputs.status().ToString());
  std::vector<kiln::TensorView> views;
  for (const HostTensor& t : *inputs) views.push_back(t.view());
  kiln::ContextOptions options;
  options.device = kiln::Device::kCpu;
  auto ctx = kiln::ExecutionContext::Create(*model, options);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  std::vector<kiln::TensorView> out;
  kiln::Status st = ctx->Run(views, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<HostTensor> result;
  for (size_t o = 0; o < out.size(); ++o) result.push_back(HostTensor::FromView(model->outputs()[o].name, out[o]));
  return result;
}

std::string Describe(const Figures& f, const Rule& rule) {
  std::ostringstream s;
  s << "cosine " << f.cosine << ", max |diff| " << f.max_abs_diff << " (max |fp32| " << f.max_abs_ref << ")";
  if (rule.metric == Metric::kArgmax)
    s << ", argmax agrees on " << f.agree << " of " << f.rows << " rows (smallest fp32 top-2 margin " << f.min_margin
      << ")";
  if (f.non_finite > 0) s << ", " << f.non_finite << " elements not finite";
  return s.str();
}

void CheckModel(const std::string& dir) {
  const std::string model = std::filesystem::path(dir).filename().string();
  const std::vector<HostTensor> reference = Run(Compile(dir, Precision::kFp32), dir);
  for (Precision precision : {Precision::kFp16, Precision::kBf16}) {
    const std::string name = kiln::passes::PrecisionName(precision);
    const std::vector<HostTensor> got = Run(Compile(dir, precision), dir);
    REQUIRE(got.size() == reference.size());
    for (size_t o = 0; o < got.size(); ++o) {
      const HostTensor& ref = reference[o];
      INFO(model << " " << name << " output " << o << " '" << ref.name << "'");
      // The precision stage keeps float32 model outputs float32 (io_dtype kFloat).
      REQUIRE(ref.dtype == DType::kFloat32);
      REQUIRE(got[o].dtype == DType::kFloat32);
      REQUIRE(got[o].dims == ref.dims);
      const Rule rule = RuleFor(model, static_cast<int>(o));
      const double bound = precision == Precision::kFp16 ? rule.fp16 : rule.bf16;
      const Figures f = Compare(got[o], ref);
      MESSAGE(model << " " << name << " output " << o << " '" << ref.name << "': " << Describe(f, rule));
      CHECK(f.non_finite == 0);
      switch (rule.metric) {
        case Metric::kCosine: CHECK_MESSAGE(f.cosine >= bound, "cosine bound " << bound); break;
        case Metric::kArgmax: CHECK(f.agree == f.rows); break;
        case Metric::kAbsolute: CHECK_MESSAGE(f.max_abs_diff <= bound, "absolute bound " << bound); break;
      }
    }
  }
}

}  // namespace

TEST_CASE("precision: every real model in fp16 and bf16 on the CPU backend agrees with its fp32 artifact") {
  const std::vector<std::string> dirs = kiln::testing::ModelDirs();
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
