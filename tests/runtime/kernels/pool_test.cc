#include <cmath>

#include <doctest/doctest.h>

#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// 4x5 ramp 0..19 with a spike of 100 at (1,2). Expected values from onnxruntime.
TestTensor PoolInput() {
  std::vector<float> v(20);
  for (int i = 0; i < 20; ++i) v[i] = static_cast<float>(i);
  v[7] = 100;
  return Floats({1, 1, 4, 5}, v);
}

TEST_CASE("MaxPool with pads, strides, ceil_mode and Indices") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 3, 3});
  auto idx = Output(DType::kInt64, {1, 1, 3, 3});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2, 3});
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {1, 1, 0, 0});
  attrs.SetInt("ceil_mode", 1);
  Status s = RunKernel("MaxPool", attrs, {&x}, {&y, &idx});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(y.values<float>() == std::vector<float>{1, 3, 4, 11, 100, 14, 16, 18, 19});
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{1, 3, 4, 11, 7, 14, 16, 18, 19});
}

TEST_CASE("pools with a kernel of 2^40 taps and pads to match take time by the input, not the kernel") {
  // Each output position's valid taps are found by division; visiting all 2^40 taps per
  // position hung (fuzz_model_load). Window o covers inputs [o - (2^40 - 1), o]: a running max
  // and, counting the padding, an average over 2^40 taps.
  const int64_t k = int64_t{1} << 40;
  auto x = Floats({1, 1, 4}, {3, 1, 4, 2});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {k});
  attrs.SetInts("pads", {k - 1, 0});
  auto y = Output(DType::kFloat32, {1, 1, 4});
  Status s = RunKernel("MaxPool", attrs, {&x}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(y.values<float>() == std::vector<float>{3, 3, 4, 4});
  attrs.SetInt("count_include_pad", 1);
  auto avg = Output(DType::kFloat32, {1, 1, 4});
  s = RunKernel("AveragePool", attrs, {&x}, {&avg});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  const std::vector<float> sums = {3, 4, 8, 10};
  for (size_t o = 0; o < 4; ++o) CHECK(avg.values<float>()[o] == doctest::Approx(sums[o] / static_cast<double>(k)));
}

TEST_CASE("pool windows that start near INT64_MAX or count 2^80 padded taps") {
  // A stride of 2^61 with pads to match puts output row 1's window at input row 2^61: empty,
  // but its offset in the plane (2^61 * row stride) overflowed int64 (UBSan, fuzz_model_load).
  // An empty window gives max's identity, -inf (docs/semantics.md).
  const int64_t far = int64_t{1} << 61;
  auto x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {1, 1});
  attrs.SetInts("strides", {far, 1});
  attrs.SetInts("pads", {0, 0, far, 0});
  auto y = Output(DType::kFloat32, {1, 1, 2, 2});
  Status s = RunKernel("MaxPool", attrs, {&x}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(y.values<float>() == std::vector<float>{1, 2, -inf, -inf});
  // Counting the padding, a 2^40 x 2^40 window holds 2^80 taps: the divisor wrapped to 0.
  const int64_t k = int64_t{1} << 40;
  auto one = Floats({1, 1, 1, 1}, {8});
  AttrMap wide;
  wide.SetInts("kernel_shape", {k, k});
  wide.SetInts("pads", {k - 1, k - 1, 0, 0});
  wide.SetInt("count_include_pad", 1);
  auto avg = Output(DType::kFloat32, {1, 1, 1, 1});
  s = RunKernel("AveragePool", wide, {&one}, {&avg});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(avg.values<float>()[0] == std::ldexp(1.0f, -77));  // 8 / 2^80
}

TEST_CASE("pool attributes whose window or padded extent overflows int64 are an error naming the axis") {
  // (kernel - 1) * dilation, in + pads and the tap count were int64 arithmetic that overflowed
  // (UBSan, on a fuzzed artifact).
  auto x = Floats({1, 1, 4}, {3, 1, 4, 2});
  auto y = Output(DType::kFloat32, {1, 1, 1});
  AttrMap wide;
  wide.SetInts("kernel_shape", {int64_t{1} << 62});
  wide.SetInts("dilations", {4});
  Status s = RunKernel("MaxPool", wide, {&x}, {&y});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("kernel_shape and dilations on spatial axis 0 make a window wider than int64") !=
        std::string::npos);
  AttrMap padded;
  padded.SetInts("kernel_shape", {2});
  padded.SetInts("pads", {INT64_MAX, INT64_MAX});
  s = RunKernel("AveragePool", padded, {&x}, {&y});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("pads on spatial axis 0 overflow int64") != std::string::npos);
}

TEST_CASE("MaxPool with dilations") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 2, 3});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2, 2});
  attrs.SetInts("dilations", {2, 2});
  REQUIRE(RunKernel("MaxPool", attrs, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{12, 13, 14, 100, 18, 100});
}

TEST_CASE("AveragePool count_include_pad on and off") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 2, 3});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {3, 3});
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {1, 1, 1, 1});
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{3, 20, 6, 10.5f, 22.33333f, 13.5f}));
  attrs.SetInt("count_include_pad", 1);
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{1.333333f, 13.33333f, 2.666667f, 7, 22.33333f, 9}));
}

TEST_CASE("AveragePool ceil_mode clips the last window to the padded extent") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 2, 2});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {3, 3});
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {0, 0, 1, 0});
  attrs.SetInt("ceil_mode", 1);
  attrs.SetInt("count_include_pad", 1);
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{16.33333f, 18.33333f, 9, 10.33333f}));
}

TEST_CASE("ceil_mode: a window wider than the input that starts inside it is one window") {
  // 2x2 input, 3x3 kernel, stride 2: floor((2 - 3) / 2) + 1 = 0 windows, ceil(...) + 1 = 1, as
  // in ONNX's reference and onnxruntime (found by a helper session).
  auto x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {3, 3});
  attrs.SetInts("strides", {2, 2});
  attrs.SetInt("ceil_mode", 1);
  auto avg = Output(DType::kFloat32, {1, 1, 1, 1});
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&avg}).ok());
  CHECK(avg.values<float>() == std::vector<float>{2.5f});  // the four inputs; no pad counted
  auto max = Output(DType::kFloat32, {1, 1, 1, 1});
  REQUIRE(RunKernel("MaxPool", attrs, {&x}, {&max}).ok());
  CHECK(max.values<float>() == std::vector<float>{4});
  // Two windows would start past the input: an output of 2 is refused.
  auto two = Output(DType::kFloat32, {1, 1, 2, 2});
  CHECK(RunKernel("AveragePool", attrs, {&x}, {&two}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("AveragePool 1-D SAME_LOWER") {
  auto x = Floats({1, 1, 5}, {0, 1, 2, 3, 4});
  auto y = Output(DType::kFloat32, {1, 1, 5});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2});
  attrs.SetString("auto_pad", "SAME_LOWER");
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{0, 0.5f, 1.5f, 2.5f, 3.5f}));
}

TEST_CASE("Global pools") {
  auto x = Floats({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -8});
  auto y = Output(DType::kFloat32, {1, 2, 1, 1});
  REQUIRE(RunKernel("GlobalAveragePool", {}, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{2.5f, -3.5f});
  REQUIRE(RunKernel("GlobalMaxPool", {}, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{4, -1});
}

// The definition, tap by tap, for a 3-D pool over one plane per (n, c): MaxPool's value and
// index (the first of equal maxima; row- or column-major spatial numbering) and
// AveragePool's mean over the valid taps.
struct PoolReference {
  std::vector<float> max, avg;
  std::vector<int64_t> idx;
};
PoolReference ReferencePool3D(const std::vector<float>& x, int64_t planes, const int64_t* in,
                              const int64_t* k, const int64_t* s, const int64_t* pb, const int64_t* d,
                              const int64_t* out, bool col_major) {
  PoolReference r;
  const int64_t in_size = in[0] * in[1] * in[2];
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t o0 = 0; o0 < out[0]; ++o0)
      for (int64_t o1 = 0; o1 < out[1]; ++o1)
        for (int64_t o2 = 0; o2 < out[2]; ++o2) {
          float best = 0;
          int64_t best_i = -1, count = 0;
          double sum = 0;
          for (int64_t k0 = 0; k0 < k[0]; ++k0)
            for (int64_t k1 = 0; k1 < k[1]; ++k1)
              for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                const int64_t p0 = o0 * s[0] - pb[0] + k0 * d[0], p1 = o1 * s[1] - pb[1] + k1 * d[1],
                              p2 = o2 * s[2] - pb[2] + k2 * d[2];
                if (p0 < 0 || p0 >= in[0] || p1 < 0 || p1 >= in[1] || p2 < 0 || p2 >= in[2]) continue;
                const float v = x[static_cast<size_t>(pl * in_size + (p0 * in[1] + p1) * in[2] + p2)];
                const int64_t at = col_major ? p0 + in[0] * (p1 + in[1] * p2) : (p0 * in[1] + p1) * in[2] + p2;
                if (best_i < 0 || v > best) {
                  best = v;
                  best_i = pl * in_size + at;
                }
                sum += v;
                ++count;
              }
          r.max.push_back(best);
          r.idx.push_back(best_i);
          r.avg.push_back(static_cast<float>(sum / static_cast<double>(count)));
        }
  }
  return r;
}

// Runs a 3-D MaxPool (with Indices, both storage orders) and AveragePool over [2, 3, in...]
// holding xv, and compares them with the definition.
void CheckPool3D(const int64_t* in, const int64_t* k, const int64_t* s, const int64_t* pb, const int64_t* pe,
                 const int64_t* d, const std::vector<float>& xv) {
  int64_t out[3];
  for (int i = 0; i < 3; ++i) out[i] = (in[i] + pb[i] + pe[i] - ((k[i] - 1) * d[i] + 1)) / s[i] + 1;
  auto x = Floats({2, 3, in[0], in[1], in[2]}, xv);
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {k[0], k[1], k[2]});
  attrs.SetInts("strides", {s[0], s[1], s[2]});
  attrs.SetInts("pads", {pb[0], pb[1], pb[2], pe[0], pe[1], pe[2]});
  attrs.SetInts("dilations", {d[0], d[1], d[2]});
  for (int64_t order : {0, 1}) {
    CAPTURE(order);
    attrs.SetInt("storage_order", order);
    const PoolReference ref = ReferencePool3D(xv, 6, in, k, s, pb, d, out, order == 1);
    auto y = Output(DType::kFloat32, {2, 3, out[0], out[1], out[2]});
    auto idx = Output(DType::kInt64, {2, 3, out[0], out[1], out[2]});
    Status st = RunKernel("MaxPool", attrs, {&x}, {&y, &idx});
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(y.values<float>() == ref.max);
    CHECK(idx.values<int64_t>() == ref.idx);
    auto avg = Output(DType::kFloat32, {2, 3, out[0], out[1], out[2]});
    AttrMap avg_attrs = attrs;
    avg_attrs.SetInt("storage_order", 0);
    REQUIRE(RunKernel("AveragePool", avg_attrs, {&x}, {&avg}).ok());
    KILN_CHECK_FLOATS(avg.values<float>(), ref.avg);
  }
}

TEST_CASE("3-D MaxPool (with Indices, both storage orders) and AveragePool match the definition") {
  const int64_t in[3] = {5, 6, 7}, k[3] = {2, 3, 2}, s[3] = {2, 1, 2}, pb[3] = {1, 0, 1}, pe[3] = {0, 1, 1},
                d[3] = {1, 2, 1};
  std::vector<float> xv(2 * 3 * 5 * 6 * 7);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37 + 11) % 23) - 9.5f;  // with ties
  CheckPool3D(in, k, s, pb, pe, d, xv);
}

// The kernel tables the rows of a window (its valid taps over the leading axes) for up to
// 512 rows; these windows have 23..25 x 21..22 rows (483 to 550: both ways), some clipped
// by pads, and a dilated last axis.
TEST_CASE("3-D pools whose windows have more rows than the kernel tables match the definition") {
  const int64_t in[3] = {34, 24, 5}, k[3] = {25, 22, 2}, s[3] = {3, 2, 2}, pb[3] = {2, 1, 0}, pe[3] = {1, 0, 1},
                d[3] = {1, 1, 2};
  const size_t n = 2 * 3 * 34 * 24 * 5;
  std::vector<float> ties(n), distinct(n);
  for (size_t i = 0; i < n; ++i) {
    ties[i] = static_cast<float>((i * 37 + 11) % 23) - 9.5f;
    distinct[i] = static_cast<float>((i * 7919) % n);  // a permutation of 0..n-1 (7919 is prime)
  }
  SUBCASE("with ties") { CheckPool3D(in, k, s, pb, pe, d, ties); }
  SUBCASE("distinct values") { CheckPool3D(in, k, s, pb, pe, d, distinct); }
}

TEST_CASE("MaxPool rejects a missing kernel_shape and a wrong output size") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 3, 4});
  CHECK(RunKernel("MaxPool", {}, {&x}, {&y}).code() == StatusCode::kInvalidArgument);
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2, 2});
  auto y33 = Output(DType::kFloat32, {1, 1, 3, 3});
  Status s = RunKernel("MaxPool", attrs, {&x}, {&y33});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "MaxPool: output spatial dim 1 is 3, expected 4");
}

}  // namespace
}  // namespace kiln::cpu::testing
