// The CPU kernels against docs/semantics.md, the policy every path follows where ONNX leaves a
// choice: NaN wherever it sits in a window or row, empty reductions per dtype, reductions over
// no axes. The fused programs and generated kernels are held to the same results by
// tests/differential/ (random graphs on every path) and its corpus.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("semantics: a NaN anywhere in a MaxPool window gives NaN, Indices name the first NaN") {
  // Windows of 2 over [1, NaN, 3, 2, NaN, NaN]: the NaN is second in the first window.
  auto x = Floats({1, 1, 6}, {1, kNaN, 3, 2, kNaN, kNaN});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2});
  attrs.SetInts("strides", {2});
  auto y = Output(DType::kFloat32, {1, 1, 3});
  auto idx = Output(DType::kInt64, {1, 1, 3});
  REQUIRE(RunKernel("MaxPool", attrs, {&x}, {&y, &idx}).ok());
  auto v = y.values<float>();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 3);
  CHECK(std::isnan(v[2]));
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{1, 2, 4});
  auto y2 = Output(DType::kFloat32, {1, 1, 3});
  REQUIRE(RunKernel("MaxPool", attrs, {&x}, {&y2}).ok());  // the path without Indices
  CHECK(std::isnan(y2.values<float>()[0]));
}

TEST_CASE("semantics: ArgMax and ArgMin take the first NaN (the last with select_last_index)") {
  auto x = Floats({6}, {1, kNaN, kInf, 7, kNaN, -kInf});
  auto y = Output(DType::kInt64, {});
  AttrMap attrs;
  attrs.SetInt("keepdims", 0);
  REQUIRE(RunKernel("ArgMax", attrs, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>()[0] == 1);
  REQUIRE(RunKernel("ArgMin", attrs, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>()[0] == 1);
  attrs.SetInt("select_last_index", 1);
  REQUIRE(RunKernel("ArgMax", attrs, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>()[0] == 4);
}

TEST_CASE("semantics: TopK orders NaN above +inf, ties by index") {
  auto x = Floats({5}, {2, kNaN, kInf, 2, kNaN});
  auto k = Int64s({1}, {5});
  auto v = Output(DType::kFloat32, {5});
  auto i = Output(DType::kInt64, {5});
  REQUIRE(RunKernel("TopK", {}, {&x, &k}, {&v, &i}).ok());
  CHECK(i.values<int64_t>() == std::vector<int64_t>{1, 4, 2, 0, 3});
  AttrMap smallest;
  smallest.SetInt("largest", 0);
  REQUIRE(RunKernel("TopK", smallest, {&x, &k}, {&v, &i}).ok());
  CHECK(i.values<int64_t>() == std::vector<int64_t>{0, 3, 2, 1, 4});
}

TEST_CASE("semantics: empty reductions give the identity of the output dtype") {
  AttrMap attrs;
  attrs.SetInt("keepdims", 0);
  auto axes = Int64s({1}, {1});
  SUBCASE("int32 ReduceMax / ReduceMin") {
    auto x = Make<int32_t>({2, 0}, {});
    auto y = Output(DType::kInt32, {2});
    REQUIRE(RunKernel("ReduceMax", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<int32_t>() == std::vector<int32_t>(2, std::numeric_limits<int32_t>::min()));
    REQUIRE(RunKernel("ReduceMin", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<int32_t>() == std::vector<int32_t>(2, std::numeric_limits<int32_t>::max()));
  }
  SUBCASE("int8 ReduceMax") {
    auto x = Make<int8_t>({2, 0}, {});
    auto y = Output(DType::kInt8, {2});
    REQUIRE(RunKernel("ReduceMax", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<int8_t>() == std::vector<int8_t>(2, -128));
  }
  SUBCASE("bool ReduceMax is false, ReduceMin true") {
    auto x = Bools({2, 0}, {});
    auto y = Output(DType::kBool, {2});
    REQUIRE(RunKernel("ReduceMax", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<uint8_t>() == std::vector<uint8_t>{0, 0});
    REQUIRE(RunKernel("ReduceMin", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 1});
  }
  SUBCASE("float sums, products, logs") {
    auto x = Floats({2, 0}, {});
    auto y = Output(DType::kFloat32, {2});
    REQUIRE(RunKernel("ReduceSum", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<float>() == std::vector<float>{0, 0});
    REQUIRE(RunKernel("ReduceProd", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<float>() == std::vector<float>{1, 1});
    REQUIRE(RunKernel("ReduceLogSumExp", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<float>() == std::vector<float>{-kInf, -kInf});
    REQUIRE(RunKernel("ReduceMax", attrs, {&x, &axes}, {&y}).ok());
    CHECK(y.values<float>() == std::vector<float>{-kInf, -kInf});
  }
}

TEST_CASE("semantics: ReduceLogSumExp of a row with +inf is +inf, not NaN") {
  auto x = Floats({2, 3}, {1, kInf, 2, -kInf, -kInf, -kInf});
  auto axes = Int64s({1}, {1});
  AttrMap attrs;
  attrs.SetInt("keepdims", 0);
  auto y = Output(DType::kFloat32, {2});
  REQUIRE(RunKernel("ReduceLogSumExp", attrs, {&x, &axes}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{kInf, -kInf});
}

TEST_CASE("semantics: Clip without bounds passes infinities and NaN through") {
  auto x = Floats({3}, {-kInf, kInf, kNaN});
  auto y = Output(DType::kFloat32, {3});
  REQUIRE(RunKernel("Clip", {}, {&x}, {&y}).ok());
  auto v = y.values<float>();
  CHECK(v[0] == -kInf);
  CHECK(v[1] == kInf);
  CHECK(std::isnan(v[2]));
}

TEST_CASE("semantics: MeanVarianceNormalization over an infinite element is NaN, as its definition computes") {
  // var = mean(x^2) - mean(x)^2 = inf - inf: NaN (the kernel clamped it to 0 and gave inf).
  auto x = Floats({1, 1, 3, 1}, {1, kInf, 2});
  auto y = Output(DType::kFloat32, {1, 1, 3, 1});
  REQUIRE(RunKernel("MeanVarianceNormalization", {}, {&x}, {&y}).ok());
  for (float v : y.values<float>()) CHECK(std::isnan(v));
}

TEST_CASE("semantics: noop_with_empty_axes reduces each element alone (ONNX opset 18)") {
  auto x = Floats({4}, {-2, 3, 0.25f, kNaN});
  AttrMap attrs;
  attrs.SetInt("noop_with_empty_axes", 1);
  auto y = Output(DType::kFloat32, {4});
  auto check = [&](const char* op, std::vector<float> want) {
    INFO(op);
    REQUIRE(RunKernel(op, attrs, {&x}, {&y}).ok());
    auto got = y.values<float>();
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
      else CHECK(got[i] == doctest::Approx(want[i]));
    }
  };
  check("ReduceSumSquare", {4, 9, 0.0625f, kNaN});
  check("ReduceL1", {2, 3, 0.25f, kNaN});
  check("ReduceL2", {2, 3, 0.25f, kNaN});
  check("ReduceLogSum", {kNaN, std::log(3.0f), std::log(0.25f), kNaN});
  check("ReduceLogSumExp", {-2, 3, 0.25f, kNaN});
  check("ReduceSum", {-2, 3, 0.25f, kNaN});
  check("ReduceMax", {-2, 3, 0.25f, kNaN});
}

TEST_CASE("semantics: Resize nearest rounds an exact tie by nearest_mode when sizes fix the scale") {
  // 6 -> 5, half_pixel: output 2 reads (2.5 * 6 / 5) - 0.5 = 2.5 exactly; float32's 5/6 made
  // it 2.5000002, which rounded up whatever nearest_mode said.
  auto x = Floats({6}, {0, 1, 2, 3, 4, 5});
  auto sizes = Int64s({1}, {5});
  auto roi = Absent(), scales = Absent();
  auto y = Output(DType::kFloat32, {5});
  AttrMap attrs;
  attrs.SetString("mode", "nearest");
  attrs.SetString("nearest_mode", "round_prefer_floor");
  REQUIRE(RunKernel("Resize", attrs, {&x, &roi, &scales, &sizes}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 1, 2, 4, 5});
  attrs.SetString("nearest_mode", "round_prefer_ceil");
  REQUIRE(RunKernel("Resize", attrs, {&x, &roi, &scales, &sizes}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 1, 3, 4, 5});
}

}  // namespace
}  // namespace kiln::cpu::testing
