// onnxruntime's com.microsoft ops that compose ONNX ops (compiler/onnx/importer.cc,
// ImportContribNode), compiled and run on the CPU backend against their formulas in
// onnxruntime's docs/ContribOperators.md, evaluated in double: Gelu (erf), FastGelu (tanh,
// with and without its bias), BiasGelu, QuickGelu (alpha) and BiasAdd, the layer norms, and
// DynamicQuantizeLSTM against ONNX's LSTM on its dequantized weights. And their errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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
  s = CompileStatus(ContribModel("QAttention", 3, bias, skip));
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message().find("domain 'com.microsoft' op 'QAttention' is not supported") != std::string::npos);
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

// A [seq 3, batch 2, input 5] LSTM of hidden size 4, bidirectional: com.microsoft
// DynamicQuantizeLSTM with int8 W [2, 5, 16] and R [2, 4, 16], a scale and zero point per
// direction for W and per direction and gate row for R, against ONNX's LSTM on the same weights
// dequantized here ((q - zero point) * scale in float32, transposed to [2, 16, K]).
TEST_CASE("com.microsoft DynamicQuantizeLSTM runs as ONNX's LSTM on its dequantized weights") {
  constexpr int64_t kSeq = 3, kBatch = 2, kIn = 5, kHidden = 4, kGates = 4 * kHidden, kDirs = 2;
  const auto int8s = [](size_t n, uint32_t seed) {
    std::vector<int8_t> v(n);
    for (int8_t& x : v) x = static_cast<int8_t>(static_cast<int>((seed = seed * 1664525u + 1013904223u) >> 24) - 128);
    return v;
  };
  const std::vector<int8_t> wq = int8s(kDirs * kIn * kGates, 1), rq = int8s(kDirs * kHidden * kGates, 2);
  const std::vector<float> ws = {0.01f, 0.02f};
  const std::vector<int8_t> wzp = {3, -2};
  std::vector<float> rs(kDirs * kGates);
  std::vector<int8_t> rzp(kDirs * kGates);
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = 0.005f * static_cast<float>(1 + i % 7), rzp[i] = static_cast<int8_t>(i % 5) - 2;
  const std::vector<float> bias = kiln::testing::RandomFloats(kDirs * 2 * kGates, 3, -0.5f, 0.5f);
  const auto raw = [](onnx::GraphProto* g, const std::string& name, int dtype, std::vector<int64_t> dims,
                      const void* data, size_t bytes) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(dtype);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(data), bytes));
  };
  const auto model = [&](bool quantized) {
    auto m = MakeModel(17);
    auto* ms = m.add_opset_import();
    ms->set_domain("com.microsoft");
    ms->set_version(1);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {std::to_string(kSeq), std::to_string(kBatch), std::to_string(kIn)});
    AddFloatInit(g, "b", {kDirs, 2 * kGates}, bias);
    if (quantized) {
      raw(g, "w", onnx::TensorProto::INT8, {kDirs, kIn, kGates}, wq.data(), wq.size());
      raw(g, "r", onnx::TensorProto::INT8, {kDirs, kHidden, kGates}, rq.data(), rq.size());
      AddFloatInit(g, "ws", {kDirs}, ws);
      raw(g, "wzp", onnx::TensorProto::INT8, {kDirs}, wzp.data(), wzp.size());
      AddFloatInit(g, "rs", {kDirs, kGates}, rs);
      raw(g, "rzp", onnx::TensorProto::INT8, {kDirs, kGates}, rzp.data(), rzp.size());
      auto* n = AddNode(g, "DynamicQuantizeLSTM", {"x", "w", "r", "b", "", "", "", "", "ws", "wzp", "rs", "rzp"},
                        {"y", "yh"}, "dq_lstm");
      n->set_domain("com.microsoft");
      AttrInt(n, "hidden_size", kHidden);
      AttrString(n, "direction", "bidirectional");
    } else {  // W[d, g, k] = (wq[d, k, g] - wzp[d]) * ws[d]; R likewise, per gate row
      std::vector<float> w(kDirs * kGates * kIn), r(kDirs * kGates * kHidden);
      for (int64_t d = 0; d < kDirs; ++d)
        for (int64_t gi = 0; gi < kGates; ++gi) {
          for (int64_t k = 0; k < kIn; ++k)
            w[(d * kGates + gi) * kIn + k] =
                static_cast<float>(wq[(d * kIn + k) * kGates + gi] - wzp[d]) * ws[d];
          for (int64_t k = 0; k < kHidden; ++k)
            r[(d * kGates + gi) * kHidden + k] =
                static_cast<float>(rq[(d * kHidden + k) * kGates + gi] - rzp[d * kGates + gi]) * rs[d * kGates + gi];
        }
      AddFloatInit(g, "w", {kDirs, kGates, kIn}, w);
      AddFloatInit(g, "r", {kDirs, kGates, kHidden}, r);
      auto* n = AddNode(g, "LSTM", {"x", "w", "r", "b"}, {"y", "yh"}, "lstm");
      AttrInt(n, "hidden_size", kHidden);
      AttrString(n, "direction", "bidirectional");
    }
    AddOutput(g, "y");
    AddOutput(g, "yh");
    return m;
  };
  // Its own errors, in its own layout: an attribute it lacks (LSTM's `layout`), and W given in
  // LSTM's [dirs, 4 * hidden, input].
  auto bad = model(true);
  AttrInt(bad.mutable_graph()->mutable_node(0), "layout", 1);
  Status st = CompileStatus(bad);
  CHECK(st.message().find("com.microsoft DynamicQuantizeLSTM has no attribute 'layout'") != std::string::npos);
  bad = model(true);
  auto* w = bad.mutable_graph()->mutable_initializer(1);
  REQUIRE(w->name() == "w");
  w->clear_dims();
  for (int64_t d : {kDirs, kGates, kIn}) w->add_dims(d);
  st = CompileStatus(bad);
  CHECK(st.message().find("DynamicQuantizeLSTM input 'W': expected [num_directions, input_size, 4 * hidden_size], "
                          "found [2, 16, 5]") != std::string::npos);
  const std::vector<float> x = kiln::testing::RandomFloats(kSeq * kBatch * kIn, 4, -2.0f, 2.0f);
  const int64_t dims[] = {kSeq, kBatch, kIn};
  const std::vector<TensorView> in = {TensorView::Host(x.data(), DType::kFloat32, dims, 3)};
  ContextOptions options;
  options.device = Device::kCpu;
  const auto got = RunFloat(CompileModel(model(true)), in, options);
  const auto want = RunFloat(CompileModel(model(false)), in, options);
  REQUIRE(got.size() == 2);
  REQUIRE(want.size() == 2);
  CHECK(got[0] == want[0]);
  CHECK(got[1] == want[1]);
  // Not all zeros: the weights reach the output.
  CHECK(std::any_of(got[0].begin(), got[0].end(), [](float v) { return std::fabs(v) > 0.05f; }));
}

}  // namespace
}  // namespace kiln::testing
