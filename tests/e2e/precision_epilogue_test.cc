// Epilogue folding on float16 and bfloat16 artifacts (`kiln compile --precision`,
// compiler/passes/epilogue.h): MatMul + bias + Relu, Gemm (its C scaled by beta) + bias + Relu,
// and Conv (with its own bias B) + a channel bias + a residual + Relu, compiled CPU-only, must
// fold into the anchor's epilogue (the trace's anchor carries epilogue_activation='Relu' and no
// Add or Relu instruction is left), and the CPU backend, which runs the float32 kernel on
// widened copies (runtime/kernels/widen.h), must give the folded result.
//
// Reference, in double, from the operands as the lowered artifact holds them: inputs, weights
// and biases rounded to the type (to nearest even, runtime/half.h), Conv's B + the bias and
// Gemm's beta * C + the bias summed and rounded to the type as the epilogue pass does at
// compile time, then the folded chain computed exactly and rounded once into the output type.
// The kernels accumulate in float32 in another order, which may move a value across a rounding
// boundary: |y - ref| <= 2u |ref| + the type's smallest subnormal, u the unit roundoff (2^-11
// float16, 2^-8 bfloat16), i.e. one unit in the last place. The same chain unfolded would round
// after every step (the GEMM, the bias, the residual), so it is held to the same bound only by
// luck; the fp32 artifact is checked against its own reference at 1e-5.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "runtime/half.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/random_floats.h"

namespace {

using kiln::DType;
using kiln::passes::Precision;
using namespace kiln::testing;

double RoundToPrecision(Precision p, double x) {
  const float f = static_cast<float>(x);
  switch (p) {
    case Precision::kFp16: return kiln::HalfToFloat(kiln::FloatToHalf(f));
    case Precision::kBf16: return kiln::BF16ToFloat(kiln::FloatToBF16(f));
    default: return f;
  }
}

// `v` rounded to the precision's type, as doubles.
std::vector<double> Rounded(Precision p, const std::vector<float>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = RoundToPrecision(p, v[i]);
  return r;
}

struct EpilogueCase {
  std::string name;
  onnx::ModelProto model;
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<int64_t>> input_dims;
  std::string anchor;  // "MatMul(", "Gemm(" or "Conv("
  // The reference for a precision (see the file comment).
  std::vector<double> (*reference)(Precision, const std::vector<std::vector<float>>&);
};

// ---- MatMul [4, 64] x [64, 32] + b + Relu -------------------------------------------------------

constexpr int kM = 4, kK = 64, kN = 32;
const std::vector<float>& MlpW() { static const auto v = RandomFloats(kK * kN, 1, -0.25f, 0.25f); return v; }
const std::vector<float>& MlpB() { static const auto v = RandomFloats(kN, 2, -1.0f, 1.0f); return v; }

std::vector<double> MlpReference(Precision p, const std::vector<std::vector<float>>& in) {
  const std::vector<double> x = Rounded(p, in[0]), w = Rounded(p, MlpW()), b = Rounded(p, MlpB());
  std::vector<double> y(kM * kN);
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j) {
      double acc = b[j];
      for (int k = 0; k < kK; ++k) acc += x[i * kK + k] * w[k * kN + j];
      y[i * kN + j] = RoundToPrecision(p, std::max(acc, 0.0));
    }
  return y;
}

onnx::ModelProto MlpModel() {
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {std::to_string(kM), std::to_string(kK)});
  AddFloatInit(g, "w", {kK, kN}, MlpW());
  AddFloatInit(g, "b", {kN}, MlpB());
  AddNode(g, "MatMul", {"x", "w"}, {"m"}, "fc");
  AddNode(g, "Add", {"m", "b"}, {"a"}, "bias");
  AddNode(g, "Relu", {"a"}, {"y"}, "relu");
  AddOutput(g, "y");
  return m;
}

// ---- Gemm(A, W, C, beta = 0.5) + b + Relu -------------------------------------------------------

const std::vector<float>& GemmC() { static const auto v = RandomFloats(kN, 3, -1.0f, 1.0f); return v; }

std::vector<double> GemmReference(Precision p, const std::vector<std::vector<float>>& in) {
  const std::vector<double> a = Rounded(p, in[0]), w = Rounded(p, MlpW()), c = Rounded(p, GemmC()),
                            b = Rounded(p, MlpB());
  std::vector<double> y(kM * kN);
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j) {
      double acc = RoundToPrecision(p, RoundToPrecision(p, 0.5 * c[j]) + b[j]);  // merged at compile time
      for (int k = 0; k < kK; ++k) acc += a[i * kK + k] * w[k * kN + j];
      y[i * kN + j] = RoundToPrecision(p, std::max(acc, 0.0));
    }
  return y;
}

onnx::ModelProto GemmModel() {
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", {std::to_string(kM), std::to_string(kK)});
  AddFloatInit(g, "w", {kK, kN}, MlpW());
  AddFloatInit(g, "c", {kN}, GemmC());
  AddFloatInit(g, "b", {kN}, MlpB());
  AttrFloat(AddNode(g, "Gemm", {"a", "w", "c"}, {"m"}, "fc"), "beta", 0.5f);
  AddNode(g, "Add", {"m", "b"}, {"t"}, "bias");
  AddNode(g, "Relu", {"t"}, {"y"}, "relu");
  AddOutput(g, "y");
  return m;
}

// ---- Conv(x, w, B) + c[8, 1, 1] + r, then Relu (ResNet's order) ---------------------------------

constexpr int kC = 4, kO = 8, kH = 6;
const std::vector<float>& ConvW() { static const auto v = RandomFloats(kO * kC * 9, 4, -0.3f, 0.3f); return v; }
const std::vector<float>& ConvB() { static const auto v = RandomFloats(kO, 5, -1.0f, 1.0f); return v; }
const std::vector<float>& ConvBias() { static const auto v = RandomFloats(kO, 6, -1.0f, 1.0f); return v; }

std::vector<double> ConvReference(Precision p, const std::vector<std::vector<float>>& in) {
  const std::vector<double> x = Rounded(p, in[0]), r = Rounded(p, in[1]), w = Rounded(p, ConvW()),
                            b0 = Rounded(p, ConvB()), b1 = Rounded(p, ConvBias());
  std::vector<double> y(kO * kH * kH);
  for (int o = 0; o < kO; ++o) {
    const double bias = RoundToPrecision(p, b0[o] + b1[o]);  // B + the folded bias, at compile time
    for (int i = 0; i < kH; ++i)
      for (int j = 0; j < kH; ++j) {
        double acc = bias;
        for (int c = 0; c < kC; ++c)
          for (int di = 0; di < 3; ++di)
            for (int dj = 0; dj < 3; ++dj) {
              const int ii = i + di - 1, jj = j + dj - 1;
              if (ii < 0 || jj < 0 || ii >= kH || jj >= kH) continue;
              acc += x[(c * kH + ii) * kH + jj] * w[((o * kC + c) * 3 + di) * 3 + dj];
            }
        const int at = (o * kH + i) * kH + j;
        y[at] = RoundToPrecision(p, std::max(acc + r[at], 0.0));
      }
  }
  return y;
}

onnx::ModelProto ConvModel() {
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  const std::string c = std::to_string(kC), o = std::to_string(kO), h = std::to_string(kH);
  AddInput(g, "x", {"1", c, h, h});
  AddInput(g, "r", {"1", o, h, h});
  AddFloatInit(g, "w", {kO, kC, 3, 3}, ConvW());
  AddFloatInit(g, "B", {kO}, ConvB());
  AddFloatInit(g, "cb", {kO, 1, 1}, ConvBias());
  AttrInts(AddNode(g, "Conv", {"x", "w", "B"}, {"cv"}, "conv"), "pads", {1, 1, 1, 1});
  AddNode(g, "Add", {"cv", "cb"}, {"t"}, "bias");
  AddNode(g, "Add", {"t", "r"}, {"s"}, "shortcut");
  AddNode(g, "Relu", {"s"}, {"y"}, "relu");
  AddOutput(g, "y");
  return m;
}

std::vector<EpilogueCase> Cases() {
  return {
      {"MatMul + bias + Relu", MlpModel(), {RandomFloats(kM * kK, 10, -1.0f, 1.0f)}, {{kM, kK}}, "MatMul(",
       MlpReference},
      {"Gemm (beta 0.5) + bias + Relu", GemmModel(), {RandomFloats(kM * kK, 11, -1.0f, 1.0f)}, {{kM, kK}}, "Gemm(",
       GemmReference},
      {"Conv (own B) + bias + residual + Relu",
       ConvModel(),
       {RandomFloats(kC * kH * kH, 12, -1.0f, 1.0f), RandomFloats(kO * kH * kH, 13, -2.0f, 2.0f)},
       {{1, kC, kH, kH}, {1, kO, kH, kH}},
       "Conv(",
       ConvReference},
  };
}

// The artifact's trace after fusion folded the chain: the anchor's line carries the Relu.
void CheckFolded(const kiln::Model& model, const std::string& anchor) {
  REQUIRE(!model.entries().empty());
  const kiln::EntryInfo& e = model.entries()[0];
  bool folded = false;
  for (const std::string& trace : e.stage_traces) {
    for (size_t at = trace.find(anchor); at != std::string::npos; at = trace.find(anchor, at + 1)) {
      const size_t end = trace.find('\n', at);
      if (trace.substr(at, end - at).find("epilogue_activation='Relu'") != std::string::npos) folded = true;
    }
  }
  CHECK_MESSAGE(folded, "no " << anchor << "...) with epilogue_activation='Relu' in the traces");
  for (const kiln::InstructionInfo& i : e.instructions) {
    CAPTURE(i.label());
    CHECK(i.op != "Add");
    CHECK(i.op != "Relu");
  }
}

}  // namespace

TEST_CASE("precision: bias, residual and Relu fold into float16 and bfloat16 MatMul, Gemm and Conv, and the CPU "
          "backend computes the folded chain") {
  for (const EpilogueCase& c : Cases()) {
    for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
      const std::string pname = kiln::passes::PrecisionName(p);
      CAPTURE(c.name);
      CAPTURE(pname);
      kiln::compiler::CompileOptions options = CpuOnly();
      options.precision.precision = p;
      const std::vector<uint8_t> bytes = CompileModel(c.model, options);
      auto model = kiln::Model::Load(bytes);
      REQUIRE_MESSAGE(model.ok(), model.status().ToString());
      CheckFolded(*model, c.anchor);
      std::vector<kiln::TensorView> views;
      for (size_t i = 0; i < c.inputs.size(); ++i)
        views.push_back(kiln::TensorView::Host(const_cast<float*>(c.inputs[i].data()), DType::kFloat32,
                                               c.input_dims[i].data(), static_cast<int32_t>(c.input_dims[i].size())));
      kiln::ContextOptions ctx_options;
      ctx_options.device = kiln::Device::kCpu;
      const std::vector<std::vector<float>> out = RunFloat(bytes, views, ctx_options);
      REQUIRE(out.size() == 1);
      const std::vector<double> ref = c.reference(p, c.inputs);
      REQUIRE(out[0].size() == ref.size());
      const double u = p == Precision::kFp16 ? std::ldexp(1.0, -11) : p == Precision::kBf16 ? std::ldexp(1.0, -8) : 0;
      const double tiny = p == Precision::kFp16 ? std::ldexp(1.0, -24) : p == Precision::kBf16 ? 1e-38 : 0;
      int bad = 0;
      double worst = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double bound = p == Precision::kFp32 ? 1e-5 * (1 + std::fabs(ref[i])) : 2 * u * std::fabs(ref[i]) + tiny;
        const double err = std::fabs(out[0][i] - ref[i]);
        worst = std::max(worst, err / bound);
        if (!(err <= bound) && bad++ < 3) FAIL_CHECK("element " << i << ": " << out[0][i] << ", reference " << ref[i]);
      }
      MESSAGE(c.name << " " << pname << ": worst error " << worst << " of the bound");
    }
  }
}
