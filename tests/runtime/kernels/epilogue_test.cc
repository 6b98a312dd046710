// Epilogue-annotated MatMul, Gemm and Conv (runtime/kernels/epilogue.h): hand-computed values,
// and equality with the unfused sequence of CPU kernels (the product, Add, the activation's
// own kernel, Add) on random inputs, for every activation and both orders.
#include "runtime/kernels/epilogue.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "runtime/kernels/activation.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

constexpr const char* kActivations[] = {"", "Relu", "Gelu", "GeluTanh", "Sigmoid", "HardSwish", "SiLU"};

template <typename T = float>
TestTensor RandomOperand(std::vector<int64_t> dims, uint32_t seed) {
  return RandomTensor<T>(std::move(dims), seed, 2.0);
}

AttrMap EpilogueAttrs(AttrMap attrs, const std::string& act, bool residual, bool residual_first) {
  if (!act.empty()) attrs.SetString("epilogue_activation", act);
  if (residual) attrs.SetInt("epilogue_residual", 1);
  attrs.SetString("epilogue_order", residual_first ? "bias,residual,act" : "bias,act,residual");
  return attrs;
}

// Runs `op` and returns its output; fails the test when the kernel does.
TestTensor Run1(std::string_view op, const AttrMap& attrs, std::vector<const TestTensor*> in, DType dtype,
                const std::vector<int64_t>& dims) {
  TestTensor y = Output(dtype, dims);
  Status st = RunKernel(op, attrs, std::move(in), {&y});
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return y;
}

// The activation `act` through the unary kernels, as the unfolded graph runs it.
TestTensor RunActivation(const TestTensor& x, const std::string& act, DType dtype) {
  const auto& dims = x.dims();
  if (act.empty()) return x;
  if (act == "SiLU") {
    TestTensor s = Run1("Sigmoid", {}, {&x}, dtype, dims);
    return Run1("Mul", {}, {&x, &s}, dtype, dims);
  }
  AttrMap attrs;
  std::string op = act;
  if (act == "GeluTanh") {
    op = "Gelu";
    attrs.SetString("approximate", "tanh");
  }
  return Run1(op, attrs, {&x}, dtype, dims);
}

// product (+ bias) then the activation and the residual in the given order, kernel by kernel.
TestTensor Unfused(const TestTensor& product, const TestTensor* bias, const std::string& act,
                   const TestTensor* residual, bool residual_first, DType dtype) {
  const auto& dims = product.dims();
  TestTensor y = bias ? Run1("Add", {}, {&product, bias}, dtype, dims) : product;
  if (residual && residual_first) y = Run1("Add", {}, {&y, residual}, dtype, dims);
  y = RunActivation(y, act, dtype);
  if (residual && !residual_first) y = Run1("Add", {}, {&y, residual}, dtype, dims);
  return y;
}

// |a - e| <= tol * (1 + |e|) elementwise; tol 0 asks for the same bits (NaN equal to NaN).
template <typename T>
void CheckEpilogueClose(const TestTensor& actual, const TestTensor& expected, double tol) {
  const auto a = actual.values<T>(), e = expected.values<T>();
  REQUIRE(a.size() == e.size());
  int bad = 0;
  for (size_t i = 0; i < a.size() && bad < 5; ++i) {
    const bool ok = tol == 0 ? (a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i])))
                             : std::fabs(static_cast<double>(a[i]) - e[i]) <= tol * (1 + std::fabs(e[i]));
    if (!ok) {
      ++bad;
      FAIL_CHECK("index " << i << ": fused " << a[i] << ", unfused " << e[i]);
    }
  }
}

TEST_CASE("epilogue: the vector HardSwish gives HardSwishOf's bits, NaN, infinities and signed zeros included") {
  std::vector<float> x = {std::nanf(""), -std::nanf(""), INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f, -3.0f,
                          2.9999998f, -2.9999998f, 1e-40f, -1e-40f, 1e30f, -1e30f, 0.5f, -1.5f};
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  for (int i = 0; i < 1001; ++i) x.push_back(dist(gen));  // an odd count: vector groups and a tail
  std::vector<float> y(x.size());
  HardSwishFloat(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    CAPTURE(x[i]);
    const float e = HardSwishOf(x[i]);
    uint32_t a, b;
    std::memcpy(&a, &y[i], 4);
    std::memcpy(&b, &e, 4);
    CHECK((std::isnan(e) ? std::isnan(y[i]) : a == b));
  }
}

TEST_CASE("epilogue: MatMul bias + Relu + residual, hand-computed, in both orders") {
  auto a = Floats({2, 2}, {1, 2, 3, 4});
  auto b = Floats({2, 2}, {1, -2, 0, 1});  // A*B = [[1, 0], [3, -2]]
  auto bias = Floats({2}, {0.5f, -1});      // -> [[1.5, -1], [3.5, -3]]
  auto r = Floats({2, 2}, {1, 1, -10, 2});
  auto y = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("MatMul", EpilogueAttrs({}, "Relu", true, false), {&a, &b, &bias, &r}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{2.5f, 1, -6.5f, 2});  // relu, then + r
  REQUIRE(RunKernel("MatMul", EpilogueAttrs({}, "Relu", true, true), {&a, &b, &bias, &r}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{2.5f, 0, 0, 0});  // + r, then relu
  auto absent = Absent();
  REQUIRE(RunKernel("MatMul", EpilogueAttrs({}, "", false, false), {&a, &b, &bias}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1.5f, -1, 3.5f, -3});  // bias alone
  REQUIRE(RunKernel("MatMul", EpilogueAttrs({}, "Relu", false, false), {&a, &b}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 0, 3, 0});  // no bias input at all
  REQUIRE(RunKernel("MatMul", EpilogueAttrs({}, "", true, false), {&a, &b, &absent, &r}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{2, 1, -7, 0});  // residual alone, bias absent
}

TEST_CASE("epilogue: Conv bias + HardSwish, hand-computed") {
  auto x = Floats({1, 1, 2, 2}, {1, -2, 3, -4});
  auto w = Floats({2, 1, 1, 1}, {1, -1});
  auto b = Floats({2}, {0.5f, 1});  // channel 0: [1.5, -1.5, 3.5, -3.5]; channel 1: [0, 3, -2, 5]
  auto y = Output(DType::kFloat32, {1, 2, 2, 2});
  REQUIRE(RunKernel("Conv", EpilogueAttrs({}, "HardSwish", false, false), {&x, &w, &b}, {&y}).ok());
  // x * clamp(x / 6 + 0.5, 0, 1)
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{1.125f, -0.375f, 3.5f, 0, 0, 3, -1.0f / 3, 5}));
}

TEST_CASE("epilogue: Gemm with C, Gelu and a residual, hand-computed") {
  auto a = Floats({1, 2}, {1, 0});
  auto b = Floats({2, 2}, {1, 0, 0, 1});
  auto c = Floats({2}, {0, -1});  // Y = A*B^T + C = [1, -1]
  auto r = Floats({1, 2}, {1, 1});
  AttrMap attrs;
  attrs.SetInt("transB", 1);
  auto y = Output(DType::kFloat32, {1, 2});
  REQUIRE(RunKernel("Gemm", EpilogueAttrs(attrs, "Gelu", true, false), {&a, &b, &c, &r}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{0.8413447f + 1, -0.15865526f + 1}));
  REQUIRE(RunKernel("Gemm", EpilogueAttrs(attrs, "Sigmoid", false, false), {&a, &b, &c}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{0.7310586f, 0.26894143f}));
}

TEST_CASE("epilogue: MatMul (shared or batched B, float32 or float64) equals MatMul, Add, activation, Add") {
  struct Case {
    std::vector<int64_t> a, b, y;
  };
  const Case cases[] = {{{2, 3, 5}, {5, 7}, {2, 3, 7}},          // one GEMM over the batch
                        {{2, 3, 5}, {2, 5, 7}, {2, 3, 7}},       // one GEMM per batch
                        {{4, 1, 3, 5}, {3, 5, 7}, {4, 3, 3, 7}}};  // broadcast batch dims
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (const char* act : kActivations) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool with_bias = variant & 1, residual_first = variant & 2;
        CAPTURE(act);
        CAPTURE(variant);
        auto a = RandomOperand(c.a, seed++), b = RandomOperand(c.b, seed++), r = RandomOperand(c.y, seed++);
        auto bias = RandomOperand({c.y.back()}, seed++);
        auto absent = Absent();
        auto y = Output(DType::kFloat32, c.y);
        REQUIRE(RunKernel("MatMul", EpilogueAttrs({}, act, true, residual_first),
                          {&a, &b, with_bias ? &bias : &absent, &r}, {&y})
                    .ok());
        TestTensor product = Run1("MatMul", {}, {&a, &b}, DType::kFloat32, c.y);
        // The fused bias is accumulated by the GEMM (beta = 1), the unfused one added after:
        // the sums round differently, by an ulp or so.
        CheckEpilogueClose<float>(y, Unfused(product, with_bias ? &bias : nullptr, act, &r, residual_first,
                                     DType::kFloat32),
                          with_bias ? 1e-5 : 0);
      }
    }
  }
  // float64 through the same path.
  auto a = RandomOperand<double>({3, 4}, 90), b = RandomOperand<double>({4, 5}, 91);
  auto r = RandomOperand<double>({3, 5}, 92);
  auto bias = RandomOperand<double>({5}, 93);
  auto y = Output(DType::kFloat64, {3, 5});
  REQUIRE(RunKernel("MatMul", EpilogueAttrs({}, "SiLU", true, true), {&a, &b, &bias, &r}, {&y}).ok());
  TestTensor product = Run1("MatMul", {}, {&a, &b}, DType::kFloat64, {3, 5});
  CheckEpilogueClose<double>(y, Unfused(product, &bias, "SiLU", &r, true, DType::kFloat64), 1e-12);
}

TEST_CASE("epilogue: Gemm equals Gemm, activation, Add") {
  uint32_t seed = 100;
  for (const char* act : kActivations) {
    for (bool residual_first : {false, true}) {
      CAPTURE(act);
      AttrMap attrs;
      attrs.SetInt("transA", 1);
      attrs.SetFloat("alpha", 0.5f);
      auto a = RandomOperand({6, 4}, seed++), b = RandomOperand({6, 9}, seed++), c = RandomOperand({9}, seed++);
      auto r = RandomOperand({4, 9}, seed++);
      auto y = Output(DType::kFloat32, {4, 9});
      const AttrMap fused = EpilogueAttrs(attrs, act, true, residual_first);
      REQUIRE(RunKernel("Gemm", fused, {&a, &b, &c, &r}, {&y}).ok());
      TestTensor product = Run1("Gemm", attrs, {&a, &b, &c}, DType::kFloat32, {4, 9});
      CheckEpilogueClose<float>(y, Unfused(product, nullptr, act, &r, residual_first, DType::kFloat32), 0);
    }
  }
}

TEST_CASE("epilogue: Conv (im2col, pointwise, grouped, depthwise) equals Conv, activation, Add") {
  struct Case {
    std::vector<int64_t> x, w, y;
    int64_t group;
    std::vector<int64_t> pads;
  };
  const Case cases[] = {
      {{2, 4, 6, 6}, {6, 4, 3, 3}, {2, 6, 6, 6}, 1, {1, 1, 1, 1}},  // im2col + GEMM
      // Two im2col tiles per image (K = 144 over 1085 pixels), each with its own epilogue.
      {{2, 16, 31, 35}, {3, 16, 3, 3}, {2, 3, 31, 35}, 1, {1, 1, 1, 1}},
      {{2, 4, 5, 5}, {3, 4, 1, 1}, {2, 3, 5, 5}, 1, {0, 0, 0, 0}},  // pointwise: GEMM on X
      {{1, 4, 5, 5}, {6, 2, 3, 3}, {1, 6, 3, 3}, 2, {0, 0, 0, 0}},  // two groups
      {{2, 4, 7, 7}, {4, 1, 3, 3}, {2, 4, 7, 7}, 4, {1, 1, 1, 1}},  // depthwise 2-D
      {{1, 3, 9}, {5, 3, 3}, {1, 5, 7}, 1, {0, 0}},                 // 1-D
  };
  uint32_t seed = 200;
  for (const Case& c : cases) {
    for (const char* act : kActivations) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool with_bias = variant & 1, residual_first = variant & 2;
        CAPTURE(c.group);
        CAPTURE(act);
        CAPTURE(variant);
        AttrMap attrs;
        attrs.SetInt("group", c.group);
        attrs.SetInts("pads", c.pads);
        auto x = RandomOperand(c.x, seed++), w = RandomOperand(c.w, seed++), r = RandomOperand(c.y, seed++);
        auto b = RandomOperand({c.w[0]}, seed++);
        auto absent = Absent();
        const TestTensor* bias = with_bias ? &b : &absent;
        auto y = Output(DType::kFloat32, c.y);
        const AttrMap fused = EpilogueAttrs(attrs, act, true, residual_first);
        REQUIRE(RunKernel("Conv", fused, {&x, &w, bias, &r}, {&y}).ok());
        TestTensor product = Run1("Conv", attrs, {&x, &w, bias}, DType::kFloat32, c.y);
        // Same product kernel, same activation formulas: the same bits.
        CheckEpilogueClose<float>(y, Unfused(product, nullptr, act, &r, residual_first, DType::kFloat32), 0);
      }
    }
  }
}

TEST_CASE("epilogue: without annotations a kernel is unchanged, without a residual it gives act(product)") {
  auto x = RandomOperand({1, 3, 5, 5}, 300), w = RandomOperand({4, 3, 3, 3}, 301), b = RandomOperand({4}, 302);
  auto y = Output(DType::kFloat32, {1, 4, 3, 3});
  REQUIRE(RunKernel("Conv", EpilogueAttrs({}, "Sigmoid", false, false), {&x, &w, &b}, {&y}).ok());
  TestTensor product = Run1("Conv", {}, {&x, &w, &b}, DType::kFloat32, {1, 4, 3, 3});
  CheckEpilogueClose<float>(y, RunActivation(product, "Sigmoid", DType::kFloat32), 0);
  auto plain = Output(DType::kFloat32, {1, 4, 3, 3});
  REQUIRE(RunKernel("Conv", EpilogueAttrs({}, "", false, false), {&x, &w, &b}, {&plain}).ok());
  CheckEpilogueClose<float>(plain, product, 0);
}

TEST_CASE("epilogue: malformed annotations are errors that name what is wrong") {
  auto a = Floats({2, 3}, {1, 2, 3, 4, 5, 6}), b = Floats({3, 2}, {1, 0, 0, 1, 1, 1});
  auto r = Floats({2, 2}, {0, 0, 0, 0}), r_bad = Floats({1, 2}, {0, 0}), bias_bad = Floats({3}, {0, 0, 0});
  auto absent = Absent();
  auto y = Output(DType::kFloat32, {2, 2});
  auto message = [&](const AttrMap& attrs, std::vector<const TestTensor*> in) {
    Status st = RunKernel("MatMul", attrs, std::move(in), {&y});
    CHECK(st.code() == StatusCode::kInvalidArgument);
    return st.message();
  };
  AttrMap unknown;
  unknown.SetString("epilogue_activation", "Tanh");
  const auto npos = std::string::npos;
  CHECK(message(unknown, {&a, &b}).find("epilogue_activation: expected one of Relu, Gelu") != npos);
  AttrMap order;
  order.SetString("epilogue_order", "act,bias");
  CHECK(message(order, {&a, &b}).find("found 'act,bias'") != npos);
  AttrMap residual_two;
  residual_two.SetInt("epilogue_residual", 2);
  CHECK(message(residual_two, {&a, &b}).find("expected the int 0 or 1, found 2") != npos);
  CHECK(message(EpilogueAttrs({}, "", true, false), {&a, &b}).find("the residual) is absent") != npos);
  CHECK(message(EpilogueAttrs({}, "", false, false), {&a, &b, &absent, &r}).find("is not 1") != npos);
  CHECK(message(EpilogueAttrs({}, "", true, false), {&a, &b, &absent, &r_bad})
            .find("residual [1, 2] must have the output's shape [2, 2]") != npos);
  CHECK(message({}, {&a, &b, &bias_bad}).find("bias [3]") != npos);
  // Integer MatMul takes no epilogue.
  auto ai = Int64s({1, 1}, {2}), bi = Int64s({1, 1}, {-3});
  auto yi = Output(DType::kInt64, {1, 1});
  Status st = RunKernel("MatMul", EpilogueAttrs({}, "Relu", false, false), {&ai, &bi}, {&yi});
  CHECK(st.message().find("float32 or float64 output, found int64") != npos);
  auto yb = Output(DType::kFloat32, {2, 2});
  auto r_int = Int64s({2, 2}, {0, 0, 0, 0});
  st = RunKernel("Gemm", EpilogueAttrs({}, "", true, false), {&a, &b, &absent, &r_int}, {&yb});
  CHECK(st.message().find("residual dtype int64 differs") != npos);
}

}  // namespace
}  // namespace kiln::cpu::testing
