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

// An opset-17 model that imports com.microsoft's version 1, with input x [3, 8].
onnx::ModelProto ContribModelWithX() {
  auto m = MakeModel(17);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  AddInput(m.mutable_graph(), "x", {std::to_string(kContribRows), std::to_string(kContribCols)});
  return m;
}

// y = op(x[, bias][, skip]) with x [3, 8], bias [8], skip [3, 8]; the extra inputs are
// initializers.
onnx::ModelProto ContribModel(const std::string& op, int inputs, const std::vector<float>& bias,
                              const std::vector<float>& skip, float alpha = 0) {
  auto m = ContribModelWithX();
  auto* g = m.mutable_graph();
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
  CHECK(s.message().find("node 'contrib' (BiasGelu): BiasGelu takes 2 inputs, got 1") != std::string::npos);
  s = CompileStatus(ContribModel("Gelu", 1, bias, skip, 2.0f));
  CHECK(s.message().find("com.microsoft Gelu has no FLOAT attribute 'alpha'") != std::string::npos);
  s = CompileStatus(ContribModel("EmbedLayerNormalization", 3, bias, skip));
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message().find("domain 'com.microsoft' op 'EmbedLayerNormalization' is not supported") != std::string::npos);
}

// y, sum = op(x, skip, gamma[, beta][, bias]) (SkipLayerNormalization: x, skip, gamma, beta,
// bias; SkipSimplifiedLayerNormalization: x, skip, gamma, bias), or y = op(x, gamma)
// (SimplifiedLayerNormalization); x and skip [3, 8], the others [8] initializers.
onnx::ModelProto ContribNormModel(const std::string& op, const std::vector<float>& skip, const std::vector<float>& gamma,
                           const std::vector<float>& beta, const std::vector<float>& bias, bool epsilon = true,
                           bool mean_output = false) {
  auto m = ContribModelWithX();
  auto* g = m.mutable_graph();
  AddFloatInit(g, "gamma", {kContribCols}, gamma);
  std::vector<std::string> ins = {"x"}, outs = {"y"};
  if (op != "SimplifiedLayerNormalization") {
    AddFloatInit(g, "skip", {kContribRows, kContribCols}, skip);
    AddFloatInit(g, "beta", {kContribCols}, beta);
    AddFloatInit(g, "bias", {kContribCols}, bias);
    ins.push_back("skip");
    ins.push_back("gamma");
    if (op == "SkipLayerNormalization") ins.push_back("beta");
    ins.push_back("bias");
    outs = {"y", mean_output ? "mean" : "", "", "sum"};
  } else {
    ins.push_back("gamma");
  }
  auto* n = AddNode(g, op, ins, outs, "norm");
  n->set_domain("com.microsoft");
  if (epsilon) AttrFloat(n, "epsilon", 1e-3f);
  AddOutput(g, "y");
  if (op != "SimplifiedLayerNormalization") AddOutput(g, "sum");
  return m;
}

TEST_CASE("com.microsoft SkipLayerNormalization, SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization") {
  const std::vector<float> x = kiln::testing::RandomFloats(kContribRows * kContribCols, 15, -3.0f, 3.0f);
  const std::vector<float> skip = kiln::testing::RandomFloats(kContribRows * kContribCols, 16, -1.0f, 1.0f);
  const std::vector<float> gamma = kiln::testing::RandomFloats(kContribCols, 17, 0.5f, 1.5f);
  const std::vector<float> beta = kiln::testing::RandomFloats(kContribCols, 18, -0.5f, 0.5f);
  const std::vector<float> bias = kiln::testing::RandomFloats(kContribCols, 19, -0.5f, 0.5f);
  const int64_t dims[] = {kContribRows, kContribCols};
  const std::vector<TensorView> in = {TensorView::Host(x.data(), DType::kFloat32, dims, 2)};
  ContextOptions options;
  options.device = Device::kCpu;
  for (const char* op : {"SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization"}) {
    CAPTURE(op);
    const std::string o = op;
    const auto got = RunFloat(CompileModel(ContribNormModel(o, skip, gamma, beta, bias)), in, options);
    REQUIRE(got.size() == (o == "SimplifiedLayerNormalization" ? 1u : 2u));
    int bad = 0;
    for (int64_t r = 0; r < kContribRows; ++r) {
      std::vector<double> s(kContribCols);
      double mean = 0, sq = 0;
      for (int64_t c = 0; c < kContribCols; ++c) {
        const size_t at = static_cast<size_t>(r * kContribCols + c);
        s[static_cast<size_t>(c)] = o == "SimplifiedLayerNormalization" ? x[at] : double{x[at]} + skip[at] + bias[static_cast<size_t>(c)];
        if (o != "SimplifiedLayerNormalization")
          bad += !(std::fabs(got[1][at] - s[static_cast<size_t>(c)]) <= 1e-6 * (1 + std::fabs(s[static_cast<size_t>(c)])));
        mean += s[static_cast<size_t>(c)] / kContribCols;
      }
      const bool layer = o == "SkipLayerNormalization";
      for (int64_t c = 0; c < kContribCols; ++c) {
        const double d = s[static_cast<size_t>(c)] - (layer ? mean : 0.0);
        sq += d * d / kContribCols;
      }
      for (int64_t c = 0; c < kContribCols; ++c) {
        const size_t at = static_cast<size_t>(r * kContribCols + c);
        const double w = (s[static_cast<size_t>(c)] - (layer ? mean : 0.0)) / std::sqrt(sq + 1e-3) * gamma[static_cast<size_t>(c)] +
                         (layer ? beta[static_cast<size_t>(c)] : 0.0);
        bad += !(std::fabs(got[0][at] - w) <= 2e-6 * (1 + std::fabs(w)));
      }
    }
    CHECK(bad == 0);
  }
  // onnxruntime's optimizer writes SimplifiedLayerNormalization in the default domain.
  {
    onnx::ModelProto m = ContribNormModel("SimplifiedLayerNormalization", skip, gamma, beta, bias);
    m.mutable_graph()->mutable_node(0)->clear_domain();
    const auto plain = RunFloat(CompileModel(m), in, options);
    const auto contrib = RunFloat(CompileModel(ContribNormModel("SimplifiedLayerNormalization", skip, gamma, beta, bias)), in, options);
    CHECK(plain == contrib);
  }
  // No epsilon on the Skip forms, and the mean output, are errors that say so.
  Status s = CompileStatus(ContribNormModel("SkipLayerNormalization", skip, gamma, beta, bias, false));
  CHECK(s.message().find("com.microsoft SkipLayerNormalization needs its 'epsilon' attribute") != std::string::npos);
  s = CompileStatus(ContribNormModel("SkipLayerNormalization", skip, gamma, beta, bias, true, true));
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message().find("output #1 ('mean') is not produced by Kiln (it writes outputs 0 and 3)") != std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
