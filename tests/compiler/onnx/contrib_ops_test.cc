// onnxruntime's com.microsoft ops that compose ONNX ops (compiler/onnx/importer.cc,
// ImportContribNode), compiled and run on the CPU backend against their formulas in
// onnxruntime's docs/ContribOperators.md, evaluated in double: Gelu (erf), FastGelu (tanh,
// with and without its bias), BiasGelu, QuickGelu (alpha) and BiasAdd. And their errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/random_floats.h"

namespace kiln::testing {
namespace {

constexpr int64_t kContribRows = 3, kContribCols = 8;

// y = op(x[, bias][, skip]) with x [3, 8], bias [8], skip [3, 8]; the extra inputs are
// initializers.
onnx::ModelProto ContribModel(const std::string& op, int inputs, const std::vector<float>& bias,
                              const std::vector<float>& skip, float alpha = 0) {
  auto m = MakeModel(17);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {std::to_string(kContribRows), std::to_string(kContribCols)});
  std::vector<std::string> ins = {"x"};
  if (inputs > 1) {
    AddFloatInit(g, "bias", {kContribCols}, bias);
    ins.push_back("bias");
  }
  if (inputs > 2) {
    AddFloatInit(g, "skip", {kContribRows, kContribCols}, skip);
    ins.push_back("skip");
  }
  auto* n = AddNode(g, op, ins, {"y"}, "contrib");
  n->set_domain("com.microsoft");
  if (alpha != 0) AttrFloat(n, "alpha", alpha);
  AddOutput(g, "y");
  return m;
}

double GeluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double GeluTanh(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

TEST_CASE("com.microsoft Gelu, FastGelu, BiasGelu, QuickGelu and BiasAdd compute their spec's formulas") {
  const std::vector<float> x = kiln::testing::RandomFloats(kContribRows * kContribCols, 5, -4.0f, 4.0f);
  const std::vector<float> bias = kiln::testing::RandomFloats(kContribCols, 6, -1.0f, 1.0f);
  const std::vector<float> skip = kiln::testing::RandomFloats(kContribRows * kContribCols, 7, -1.0f, 1.0f);
  struct Case {
    const char* op;
    int inputs;
    float alpha;
    std::function<double(int64_t r, int64_t c)> want;
  };
  const auto xv = [&](int64_t r, int64_t c) { return double{x[static_cast<size_t>(r * kContribCols + c)]}; };
  const Case cases[] = {
      {"Gelu", 1, 0, [&](int64_t r, int64_t c) { return GeluErf(xv(r, c)); }},
      {"FastGelu", 1, 0, [&](int64_t r, int64_t c) { return GeluTanh(xv(r, c)); }},
      {"FastGelu", 2, 0, [&](int64_t r, int64_t c) { return GeluTanh(xv(r, c) + bias[static_cast<size_t>(c)]); }},
      {"BiasGelu", 2, 0, [&](int64_t r, int64_t c) { return GeluErf(xv(r, c) + bias[static_cast<size_t>(c)]); }},
      {"QuickGelu", 1, 0, [&](int64_t r, int64_t c) { return xv(r, c) / (1 + std::exp(-1.702 * xv(r, c))); }},
      {"QuickGelu", 1, 1.5f, [&](int64_t r, int64_t c) { return xv(r, c) / (1 + std::exp(-1.5 * xv(r, c))); }},
      {"BiasAdd", 3, 0,
       [&](int64_t r, int64_t c) {
         return xv(r, c) + bias[static_cast<size_t>(c)] + skip[static_cast<size_t>(r * kContribCols + c)];
       }},
  };
  const int64_t dims[] = {kContribRows, kContribCols};
  const std::vector<TensorView> in = {TensorView::Host(x.data(), DType::kFloat32, dims, 2)};
  ContextOptions options;
  options.device = Device::kCpu;
  for (const Case& c : cases) {
    CAPTURE(c.op);
    CAPTURE(c.inputs);
    CAPTURE(c.alpha);
    const auto got = RunFloat(CompileModel(ContribModel(c.op, c.inputs, bias, skip, c.alpha)), in, options);
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].size() == static_cast<size_t>(kContribRows * kContribCols));
    int bad = 0;
    for (int64_t r = 0; r < kContribRows; ++r)
      for (int64_t k = 0; k < kContribCols; ++k) {
        const double w = c.want(r, k);
        bad += !(std::fabs(got[0][static_cast<size_t>(r * kContribCols + k)] - w) <= 2e-6 * (1 + std::fabs(w)));
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("com.microsoft ops: wrong arity, an unknown attribute and an op Kiln lacks are clear errors") {
  const std::vector<float> bias(kContribCols, 0.0f), skip(kContribRows * kContribCols, 0.0f);
  Status s = CompileStatus(ContribModel("BiasGelu", 1, bias, skip));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("node 'contrib' (BiasGelu): com.microsoft BiasGelu takes 2 inputs, got 1") != std::string::npos);
  s = CompileStatus(ContribModel("Gelu", 1, bias, skip, 2.0f));
  CHECK(s.message().find("com.microsoft Gelu has no attribute 'alpha' (it has none)") != std::string::npos);
  s = CompileStatus(ContribModel("SkipLayerNormalization", 3, bias, skip));
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message().find("domain 'com.microsoft' op 'SkipLayerNormalization' is not supported") != std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
