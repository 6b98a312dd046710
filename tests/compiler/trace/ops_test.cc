// Each op of the tracing API (include/kiln/trace.h) on small inputs, compiled to a CPU
// artifact and run, against values computed by hand; and the ONNX nodes each op records.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kiln/trace.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/trace/trace_test_util.h"

namespace {

using namespace kiln::trace;  // NOLINT: the API under test
using kiln::DType;
using kiln::TensorView;
using kiln::testing::TraceCpuOptions;

// Compiles `b` for the CPU and runs it on `inputs`; the outputs as float vectors.
std::vector<std::vector<float>> CompileAndRun(const Builder& b, std::vector<TensorView> inputs) {
  auto bytes = b.Compile(TraceCpuOptions());
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  return kiln::testing::RunFloat(*bytes, inputs);
}

void CheckOpsNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-6f) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(got[i] == doctest::Approx(want[i]).epsilon(tol), "element " << i);
}

}  // namespace

TEST_CASE("trace api: Linear on a 2x3 input is x @ W + b, recorded as MatMul then Add") {
  Builder b("linear");
  Tensor x = b.Input("x", DType::kFloat32, {"N", 3});
  const std::vector<float> w = {1, 0, 0, 1, 1, 1}, bias = {0.5f, -1};
  Tensor y = Linear(x, b.Parameter("fc1.weight", {3, 2}, w), b.Parameter("fc1.bias", {2}, bias), "fc1");
  REQUIRE(y.valid());
  CHECK(y.name() == "fc1");
  CHECK(y.dtype() == DType::kFloat32);
  REQUIRE(y.shape().size() == 2);
  CHECK(y.shape()[0].symbol() == "N");
  CHECK(y.shape()[1].size() == 2);
  b.Output(y);
  const std::string text = b.Print();
  CHECK(text.find("fc1.matmul = MatMul(x, fc1.weight)") != std::string::npos);
  CHECK(text.find("fc1 = Add(fc1.matmul, fc1.bias)") != std::string::npos);
  const float xs[] = {1, 2, 3, 4, 5, 6};
  auto out = CompileAndRun(b, {TensorView::Host(xs, DType::kFloat32, {2, 3})});
  // [[1+3, 2+3], [4+6, 5+6]] + [0.5, -1]
  CheckOpsNear(out[0], {4.5f, 4, 10.5f, 10});
}

TEST_CASE("trace api: Linear without a bias is one MatMul, MatMul broadcasts batch dims") {
  Builder b("matmul");
  Tensor a = b.Input("a", DType::kFloat32, {2, 1, 2});
  b.Output(Linear(a, b.Parameter("w", {2, 1}, std::vector<float>{1, 10}), Tensor(), "proj"));
  b.Output(MatMul(a, b.Parameter("v", {1, 2, 1}, std::vector<float>{2, 1}), "mm"));
  CHECK(b.Print().find("proj = MatMul(a, w)") != std::string::npos);
  const float as[] = {1, 2, 3, 4};
  auto out = CompileAndRun(b, {TensorView::Host(as, DType::kFloat32, {2, 1, 2})});
  CheckOpsNear(out[0], {21, 43});
  CheckOpsNear(out[1], {4, 10});
}

TEST_CASE("trace api: Conv2d with bias, stride and padding") {
  Builder b("conv");
  Tensor x = b.Input("x", DType::kFloat32, {1, 1, 3, 3});
  Tensor w = b.Parameter("w", {1, 1, 2, 2}, std::vector<float>{1, 0, 0, 1});
  Tensor bias = b.Parameter("bias", {1}, std::vector<float>{10});
  b.Output(Conv2d(x, w, bias, {}, "plain"));
  Conv2dOptions o;
  o.stride[0] = o.stride[1] = 2;
  o.padding[0] = o.padding[1] = o.padding[2] = o.padding[3] = 1;
  b.Output(Conv2d(x, w, bias, o, "strided"));
  const float xs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto out = CompileAndRun(b, {TensorView::Host(xs, DType::kFloat32, {1, 1, 3, 3})});
  CheckOpsNear(out[0], {1 + 5 + 10, 2 + 6 + 10, 4 + 8 + 10, 5 + 9 + 10});
  // Padded windows: the kernel's 1 at (0,0) lands on padding except in the last row/column.
  CheckOpsNear(out[1], {0 + 1 + 10, 0 + 3 + 10, 0 + 7 + 10, 5 + 9 + 10});
}

TEST_CASE("trace api: Relu, Sigmoid, Tanh, exact Gelu and Softmax") {
  Builder b("activations");
  Tensor x = b.Input("x", DType::kFloat32, {3});
  b.Output(Relu(x));
  b.Output(Sigmoid(x));
  b.Output(Tanh(x));
  b.Output(Gelu(x));
  b.Output(Softmax(x, 0));
  b.Output(Relu(x));
  CHECK(b.Print().find("relu_1 = Relu(x)") != std::string::npos);  // the default name, made unique
  const float xs[] = {-1, 0, 2};
  auto out = CompileAndRun(b, {TensorView::Host(xs, DType::kFloat32, {3})});
  CheckOpsNear(out[0], {0, 0, 2});
  CheckOpsNear(out[1], {0.26894142f, 0.5f, 0.88079708f});
  CheckOpsNear(out[2], {-0.76159416f, 0, 0.96402758f});
  CheckOpsNear(out[3], {-0.15865525f, 0, 1.95449974f});  // x * Phi(x)
  CheckOpsNear(out[4], {0.04201007f, 0.11419519f, 0.84379473f});  // e^x / (e^-1 + 1 + e^2)
}

TEST_CASE("trace api: LayerNorm over the last axis with scale and bias") {
  Builder b("layer_norm");
  Tensor x = b.Input("x", DType::kFloat32, {1, 4});
  Tensor scale = b.Parameter("scale", {4}, std::vector<float>{1, 1, 2, 2});
  Tensor bias = b.Parameter("bias", {4}, std::vector<float>{0, 0, 0, 1});
  b.Output(LayerNorm(x, scale, bias, -1, 1e-5f, "ln"));
  b.Output(LayerNorm(x, scale, Tensor(), -1, 1e-5f, "ln_no_bias"));
  const float xs[] = {1, 2, 3, 4};
  auto out = CompileAndRun(b, {TensorView::Host(xs, DType::kFloat32, {1, 4})});
  // mean 2.5, variance 1.25: (x - 2.5) / sqrt(1.25 + 1e-5)
  const float s = 1 / std::sqrt(1.25f + 1e-5f);
  CheckOpsNear(out[0], {-1.5f * s, -0.5f * s, 2 * 0.5f * s, 2 * 1.5f * s + 1}, 1e-5f);
  CheckOpsNear(out[1], {-1.5f * s, -0.5f * s, 2 * 0.5f * s, 2 * 1.5f * s}, 1e-5f);
}

TEST_CASE("trace api: Transpose and Reshape (0 copies a dim, -1 is inferred)") {
  Builder b("movement");
  Tensor x = b.Input("x", DType::kFloat32, {"N", 3});
  Tensor t = Transpose(x, {1, 0}, "t");
  CHECK(t.shape()[0].size() == 3);
  CHECK(t.shape()[1].symbol() == "N");
  b.Output(Reshape(t, {-1}, "flat"));
  Tensor r = Reshape(x, {0, 3, 1}, "r");
  CHECK(r.shape()[0].symbol() == "N");
  b.Output(r);
  const float xs[] = {0, 1, 2, 3, 4, 5};
  auto out = CompileAndRun(b, {TensorView::Host(xs, DType::kFloat32, {2, 3})});
  CheckOpsNear(out[0], {0, 3, 1, 4, 2, 5});
  CheckOpsNear(out[1], {0, 1, 2, 3, 4, 5});
}

TEST_CASE("trace api: + - * / on tensors (broadcast) and with scalars on either side") {
  Builder b("arith");
  Tensor a = b.Input("a", DType::kFloat32, {"N", 2});
  Tensor c = b.Parameter("c", {2}, std::vector<float>{2, 4});
  b.Output(a + c);
  b.Output(a - c);
  b.Output(a * c);
  b.Output(a / c);
  b.Output(Add(a * 3.0f, 1.0f - a, "named"));  // 3a + 1 - a
  b.Output(8.0f / a);
  b.Output(a / 2.0f + 2.0f * a);
  CHECK(b.Print().find("named = Add(") != std::string::npos);
  const float as[] = {1, 2, 4, 8, -2, 0.5f};
  auto out = CompileAndRun(b, {TensorView::Host(as, DType::kFloat32, {3, 2})});
  CheckOpsNear(out[0], {3, 6, 6, 12, 0, 4.5f});
  CheckOpsNear(out[1], {-1, -2, 2, 4, -4, -3.5f});
  CheckOpsNear(out[2], {2, 8, 8, 32, -4, 2});
  CheckOpsNear(out[3], {0.5f, 0.5f, 2, 2, -1, 0.125f});
  CheckOpsNear(out[4], {3, 5, 9, 17, -3, 2});
  CheckOpsNear(out[5], {8, 4, 2, 1, -4, 16});
  CheckOpsNear(out[6], {2.5f, 5, 10, 20, -5, 1.25f});
}
