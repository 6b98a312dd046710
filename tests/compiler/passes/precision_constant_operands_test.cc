// The precision stage and the constant operands of `follow` ops: a constant should neither
// pull a value the table keeps in float32 (it outgrows float16) down to float16, nor vanish in
// its conversion (an epsilon that float16 rounds to 0).
// Constants do not vote in the follow rule, and a follower whose constant float16 rounds to
// 0 or infinity stays float32.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "compiler/passes/precision.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

kiln::compiler::CompileOptions Fp16Options(bool fuse) {
  kiln::compiler::CompileOptions o = CpuOnly();
  o.precision.precision = kiln::passes::Precision::kFp16;
  o.fuse = fuse;
  return o;
}

}  // namespace

TEST_CASE("precision: Exp(x) * 0.1 stays float32 after the float32 Exp (x = 12: 16275.5, float16 holds it)") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddFloatInit(g, "k", {}, {0.1f});
  AddNode(g, "Exp", {"x"}, {"e"}, "exp");
  AddNode(g, "Mul", {"e", "k"}, {"y"}, "scale");
  AddOutput(g, "y");
  float x[2] = {12.0f, 1.0f};
  const kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2})};
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    const auto out = RunFloat(CompileModel(m, Fp16Options(fuse)), in, {.device = kiln::Device::kCpu});
    // exp(12) = 162754.79 leaves float16's range; the product is float32 arithmetic on it.
    CHECK(out[0][0] == doctest::Approx(std::exp(12.0f) * 0.1f).epsilon(1e-6));
    CHECK(out[0][1] == doctest::Approx(std::exp(1.0f) * 0.1f).epsilon(1e-6));
  }
}

TEST_CASE("precision: ReduceSum(x) / n (a mean) stays float32 after the float32 ReduceSum") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "4096"});
  AddInt64Init(g, "axes", {1}, {1});
  AddFloatInit(g, "n", {}, {4096.0f});
  AddNode(g, "ReduceSum", {"x", "axes"}, {"s"}, "sum");
  AddNode(g, "Div", {"s", "n"}, {"y"}, "mean");
  AddOutput(g, "y");
  std::vector<float> x(4096, 30.0f);  // sum 122880 > 65504
  const kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {1, 4096})};
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    const auto out = RunFloat(CompileModel(m, Fp16Options(fuse)), in, {.device = kiln::Device::kCpu});
    CHECK(out[0][0] == 30.0f);
  }
}

TEST_CASE("precision: BERT-style LayerNorm's epsilon 1e-12 survives fp16 - a constant row normalises to 0, not NaN") {
  // y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + 1e-12) over rows of 8.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "8"});
  AddFloatInit(g, "two", {}, {2.0f});
  AddFloatInit(g, "eps", {}, {1e-12f});
  AttrInts(AddNode(g, "ReduceMean", {"x"}, {"mu"}, "mean"), "axes", {-1});
  AddNode(g, "Sub", {"x", "mu"}, {"d"}, "sub");
  AddNode(g, "Pow", {"d", "two"}, {"d2"}, "square");
  AttrInts(AddNode(g, "ReduceMean", {"d2"}, {"var"}, "variance"), "axes", {-1});
  AddNode(g, "Add", {"var", "eps"}, {"ve"}, "add_eps");
  AddNode(g, "Sqrt", {"ve"}, {"sd"}, "sqrt");
  AddNode(g, "Div", {"d", "sd"}, {"y"}, "normalise");
  AddOutput(g, "y");
  std::vector<float> x(16, 0.5f);  // row 0 constant: float32 gives 0 / 1e-6 = 0
  for (int i = 0; i < 8; ++i) x[8 + i] = static_cast<float>(i);
  const kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {2, 8})};
  // Row 1: (i - 3.5) / sqrt(5.25).
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    const auto out = RunFloat(CompileModel(m, Fp16Options(fuse)), in, {.device = kiln::Device::kCpu});
    for (int i = 0; i < 8; ++i) {
      CAPTURE(i);
      CHECK(out[0][i] == 0.0f);
      CHECK(out[0][8 + i] == doctest::Approx((i - 3.5) / std::sqrt(5.25)).epsilon(2e-3));
    }
  }
}
