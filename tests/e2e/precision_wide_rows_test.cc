// LayerNormalization and Softmax compiled with float16 and bfloat16 activations
// (`kiln compile --precision`, compiler/passes/precision.h), end to end: an ONNX model of
// the one op, compiled CPU-only both fused (the generated kernel, run by the portable
// interpreter) and unfused (the CPU backend's kernel), run on the CPU backend, against a
// reference computed here in double.
//
// The rows are wide (4096) and their values around +-300: a row sums to about 1.2e6 and
// its squares to 3.7e8, far beyond float16's largest finite value (65504), so statistics
// accumulated in float16 give infinity or NaN. The policy keeps the statistics, the
// exponentials and their sums in float32 and only stores the result in the lower type.
//
// Every input is an even integer in [256, 512) or (-512, -256], exact in bfloat16 (step 2
// there) and float16 (step 0.25), so the inputs the op sees do not depend on where the
// precision stage puts its Casts, and the reference needs no rounding of its own. The
// outputs are stored in the lower type once: |y - ref| <= atol + 2u |ref|, u the type's unit
// roundoff (2^-11 float16, 2^-8 bfloat16), atol the float16 subnormal step (2^-24) for
// Softmax's smallest probabilities and 1e-5 otherwise; the factor 2 covers the float32
// arithmetic (a 4096-term sum in float32 is good to ~1e-5 relative here). Unfused, the op's
// CPU kernel stores its result in the lower type and a Cast widens it, so every output must
// also be a value of that type: the check that the lowered kernel ran. The fused kernel
// rounds its input Cast but keeps the op's result in float32 registers up to the final
// Cast to float32, so its error is far inside the bound.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "runtime/half.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace {

using kiln::passes::Precision;
using namespace kiln::testing;

constexpr int64_t kRows = 2, kWidth = 4096;
constexpr float kEpsilon = 1e-5f;

// Row 0 around +300, row 1 around -300, in even steps (see the file comment), spread over
// +-2 * `spread`: LayerNorm's over +-8 (a standard deviation of ~5), Softmax's over +-4
// (probabilities from ~4e-7, a float16 subnormal, to ~1e-3).
std::vector<float> RowInputs(int spread) {
  std::vector<float> x(kRows * kWidth);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t i = 0; i < kWidth; ++i)
      x[r * kWidth + i] = (r == 0 ? 300.0f : -300.0f) + 2.0f * static_cast<float>((i * 37 + r * 11) % (2 * spread + 1) - spread);
  return x;
}

// Scale and bias for LayerNormalization, exact in both types.
float Scale(int64_t i) { return 0.5f + 0.25f * static_cast<float>(i % 4); }
float Bias(int64_t i) { return 0.5f * static_cast<float>(i % 3) - 0.5f; }

onnx::ModelProto LayerNormModel() {
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {std::to_string(kRows), std::to_string(kWidth)});
  std::vector<float> scale(kWidth), bias(kWidth);
  for (int64_t i = 0; i < kWidth; ++i) {
    scale[i] = Scale(i);
    bias[i] = Bias(i);
  }
  AddFloatInit(g, "scale", {kWidth}, scale);
  AddFloatInit(g, "bias", {kWidth}, bias);
  AttrFloat(AddNode(g, "LayerNormalization", {"x", "scale", "bias"}, {"y"}, "ln"), "epsilon", kEpsilon);
  AddOutput(g, "y");
  return m;
}

onnx::ModelProto WideSoftmaxModel() {
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {std::to_string(kRows), std::to_string(kWidth)});
  AddNode(g, "Softmax", {"x"}, {"y"}, "softmax");  // axis -1
  AddOutput(g, "y");
  return m;
}

std::vector<double> LayerNormReference(const std::vector<float>& x) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    const float* row = x.data() + r * kWidth;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < kWidth; ++i) mean += row[i];
    mean /= kWidth;
    for (int64_t i = 0; i < kWidth; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= kWidth;
    const double inv_std = 1.0 / std::sqrt(var + kEpsilon);
    for (int64_t i = 0; i < kWidth; ++i) y[r * kWidth + i] = (row[i] - mean) * inv_std * Scale(i) + Bias(i);
  }
  return y;
}

std::vector<double> SoftmaxReference(const std::vector<float>& x) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    const float* row = x.data() + r * kWidth;
    double max = row[0], sum = 0;
    for (int64_t i = 1; i < kWidth; ++i) max = std::max(max, static_cast<double>(row[i]));
    for (int64_t i = 0; i < kWidth; ++i) sum += std::exp(row[i] - max);
    for (int64_t i = 0; i < kWidth; ++i) y[r * kWidth + i] = std::exp(row[i] - max) / sum;
  }
  return y;
}

// Compiles `model` in `precision`, fused or not, runs it on the CPU backend and checks
// every output element against `ref`.
void Check(const onnx::ModelProto& model, const std::vector<float>& x, const std::vector<double>& ref,
           Precision precision, bool fuse, double atol) {
  const std::string name = kiln::passes::PrecisionName(precision);
  CAPTURE(name);
  CAPTURE(fuse);
  kiln::compiler::CompileOptions options = CpuOnly();
  options.precision.precision = precision;
  options.fuse = fuse;
  kiln::compiler::CompileSummary summary;
  const std::vector<uint8_t> artifact = CompileModel(model, options, &summary);
  // The path under test: a generated kernel (the Casts fuse into it), or none at all.
  CHECK(summary.kernels == (fuse ? 1 : 0));
  kiln::ContextOptions cpu;
  cpu.device = kiln::Device::kCpu;
  const kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {kRows, kWidth})};
  const std::vector<std::vector<float>> out = RunFloat(artifact, in, cpu);
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].size() == ref.size());
  const double rtol = precision == Precision::kFp16 ? 0x1p-10 : 0x1p-7;  // 2u
  int64_t bad = 0, non_finite = 0;
  double worst = 0;  // the largest |y - ref| / (atol + rtol |ref|)
  for (size_t i = 0; i < ref.size(); ++i) {
    const double y = out[0][i], bound = atol + rtol * std::fabs(ref[i]);
    if (!std::isfinite(y)) ++non_finite;
    const double err = std::fabs(y - ref[i]);
    worst = std::max(worst, err / bound);
    if (!(err <= bound) && bad++ == 0)
      MESSAGE("element " << i << " is " << y << ", the double reference " << ref[i] << " (bound " << bound << ")");
  }
  const std::string path = fuse ? "fused" : "unfused";
  MESSAGE(name << " " << path << ": worst error " << worst << " of the bound, " << bad
                << " elements over it, " << non_finite << " not finite");
  CHECK(non_finite == 0);
  CHECK(bad == 0);
  if (!fuse) {
    int64_t not_lower = 0;
    for (float y : out[0]) {
      const float rounded = precision == Precision::kFp16 ? kiln::HalfToFloat(kiln::FloatToHalf(y))
                                                          : kiln::BF16ToFloat(kiln::FloatToBF16(y));
      if (rounded != y) ++not_lower;
    }
    CHECK_MESSAGE(not_lower == 0, not_lower << " outputs are not " << name << " values");
  }
}

}  // namespace

TEST_CASE("precision: LayerNormalization over rows of 4096 values around +-300 stays finite and correct in fp16 and bf16") {
  const std::vector<float> x = RowInputs(4);
  const std::vector<double> ref = LayerNormReference(x);
  for (Precision p : {Precision::kFp16, Precision::kBf16})
    for (bool fuse : {true, false}) Check(LayerNormModel(), x, ref, p, fuse, 1e-5);
}

TEST_CASE("precision: Softmax over rows of 4096 values around +-300 stays finite and correct in fp16 and bf16") {
  const std::vector<float> x = RowInputs(2);
  const std::vector<double> ref = SoftmaxReference(x);
  for (Precision p : {Precision::kFp16, Precision::kBf16})
    for (bool fuse : {true, false}) Check(WideSoftmaxModel(), x, ref, p, fuse, 0x1p-24);
}
