#include <doctest/doctest.h>

#include <cmath>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

std::vector<float> RunUnary(std::string_view op, std::vector<float> x, const AttrMap& attrs = {}) {
  auto in = Floats({static_cast<int64_t>(x.size())}, x);
  auto out = Output(DType::kFloat32, {static_cast<int64_t>(x.size())});
  Status s = RunKernel(op, attrs, {&in}, {&out});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return out.values<float>();
}

TEST_CASE("Relu float32: vector body and tail agree with onnxruntime, NaN and -0 included") {
  // onnxruntime 1.32 on the same input: [0, 0.5, -0, nan, 3, 0, 1e-40, 0, 7].
  const float nan = std::nanf("");
  const auto y = RunUnary("Relu", {-1, 0.5f, -0.0f, nan, 3, -2, 1e-40f, -1e-40f, 7});
  const std::vector<float> want{0, 0.5f, -0.0f, nan, 3, 0, 1e-40f, 0, 7};
  REQUIRE(y.size() == want.size());
  for (size_t i = 0; i < y.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(y[i]));
      continue;
    }
    CHECK(y[i] == want[i]);
    CHECK(std::signbit(y[i]) == std::signbit(want[i]));
  }
}

TEST_CASE("Activations") {
  CHECK(RunUnary("Relu", {-1, 0, 2}) == std::vector<float>{0, 0, 2});
  KILN_CHECK_FLOATS(RunUnary("LeakyRelu", {-1, 2}), (std::vector<float>{-0.01f, 2}));
  AttrMap alpha;
  alpha.SetFloat("alpha", 0.5f);
  KILN_CHECK_FLOATS(RunUnary("LeakyRelu", {-1, 2}, alpha), (std::vector<float>{-0.5f, 2}));
  KILN_CHECK_FLOATS(RunUnary("Sigmoid", {0, 2, -2, -100}),
                    (std::vector<float>{0.5f, 0.880797f, 0.1192029f, 3.7200760e-44f}));
  KILN_CHECK_FLOATS(RunUnary("Tanh", {0, 1}), (std::vector<float>{0, 0.7615942f}));
  KILN_CHECK_FLOATS(RunUnary("Softplus", {0, 1, 100}), (std::vector<float>{0.6931472f, 1.3132616f, 100}));
  KILN_CHECK_FLOATS(RunUnary("Elu", {-1, 1}), (std::vector<float>{-0.6321206f, 1}));
  KILN_CHECK_FLOATS(RunUnary("Selu", {-1, 1}), (std::vector<float>{-1.1113307f, 1.050701f}));
  KILN_CHECK_FLOATS(RunUnary("Gelu", {-1, 0, 1}), (std::vector<float>{-0.15865526f, 0, 0.8413447f}));
  AttrMap tanh;
  tanh.SetString("approximate", "tanh");
  KILN_CHECK_FLOATS(RunUnary("Gelu", {-1, 1}, tanh), (std::vector<float>{-0.15880801f, 0.841192f}));
  KILN_CHECK_FLOATS(RunUnary("HardSigmoid", {-5, 0, 1, 5}), (std::vector<float>{0, 0.5f, 0.7f, 1}));
  KILN_CHECK_FLOATS(RunUnary("HardSwish", {-4, 1, 4}), (std::vector<float>{0, 0.6666667f, 4}));
}

TEST_CASE("Math functions") {
  KILN_CHECK_FLOATS(RunUnary("Exp", {0, 1}), (std::vector<float>{1, 2.7182817f}));
  KILN_CHECK_FLOATS(RunUnary("Log", {1, 2.7182817f}), (std::vector<float>{0, 1}));
  KILN_CHECK_FLOATS(RunUnary("Sqrt", {4, 2}), (std::vector<float>{2, 1.4142135f}));
  KILN_CHECK_FLOATS(RunUnary("Reciprocal", {4, -0.5f}), (std::vector<float>{0.25f, -2}));
  CHECK(RunUnary("Neg", {1, -2}) == std::vector<float>{-1, 2});
  CHECK(RunUnary("Abs", {1, -2}) == std::vector<float>{1, 2});
  CHECK(RunUnary("Floor", {1.5f, -1.5f}) == std::vector<float>{1, -2});
  CHECK(RunUnary("Ceil", {1.5f, -1.5f}) == std::vector<float>{2, -1});
  CHECK(RunUnary("Round", {0.5f, 1.5f, 2.5f, -0.5f, 2.6f}) == std::vector<float>{0, 2, 2, -0, 3});
  KILN_CHECK_FLOATS(RunUnary("Erf", {0, 1}), (std::vector<float>{0, 0.8427008f}));
  KILN_CHECK_FLOATS(RunUnary("Sin", {0, 1}), (std::vector<float>{0, 0.84147096f}));
  KILN_CHECK_FLOATS(RunUnary("Cos", {0, 1}), (std::vector<float>{1, 0.5403023f}));
  CHECK(RunUnary("Sign", {-3, 0, 2}) == std::vector<float>{-1, 0, 1});
}

TEST_CASE("Integer Neg/Abs/Sign and bool Not") {
  auto x = Int64s({3}, {-3, 0, 4});
  auto y = Output(DType::kInt64, {3});
  REQUIRE(RunKernel("Neg", {}, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{3, 0, -4});
  REQUIRE(RunKernel("Abs", {}, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{3, 0, 4});
  REQUIRE(RunKernel("Sign", {}, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{-1, 0, 1});
  auto b = Bools({2}, {true, false});
  auto nb = Output(DType::kBool, {2});
  REQUIRE(RunKernel("Not", {}, {&b}, {&nb}).ok());
  CHECK(nb.values<uint8_t>() == std::vector<uint8_t>{0, 1});
}

TEST_CASE("Clip with absent, min-only and both bounds") {
  auto x = Floats({4}, {-2, -0.5f, 0.5f, 2});
  auto lo = Floats({}, {-1});
  auto hi = Floats({}, {1});
  auto absent = Absent();
  auto y = Output(DType::kFloat32, {4});
  REQUIRE(RunKernel("Clip", {}, {&x, &lo, &hi}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{-1, -0.5f, 0.5f, 1});
  REQUIRE(RunKernel("Clip", {}, {&x, &absent, &hi}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{-2, -0.5f, 0.5f, 1});
  REQUIRE(RunKernel("Clip", {}, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{-2, -0.5f, 0.5f, 2});
  auto xi = Int64s({3}, {-5, 3, 9});
  auto loi = Int64s({}, {0});
  auto hii = Int64s({}, {6});
  auto yi = Output(DType::kInt64, {3});
  REQUIRE(RunKernel("Clip", {}, {&xi, &loi, &hii}, {&yi}).ok());
  CHECK(yi.values<int64_t>() == std::vector<int64_t>{0, 3, 6});
}

TEST_CASE("Unary rejects wrong dtypes and sizes") {
  auto x = Int64s({2}, {1, 2});
  auto y = Output(DType::kInt64, {2});
  CHECK(RunKernel("Sigmoid", {}, {&x}, {&y}).code() == StatusCode::kInvalidArgument);
  auto xf = Floats({2}, {1, 2});
  auto yf = Output(DType::kFloat32, {3});
  CHECK(RunKernel("Relu", {}, {&xf}, {&yf}).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu::testing
