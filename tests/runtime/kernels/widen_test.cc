// float16 and bfloat16 operands of kernels that compute in float32 (runtime/kernels/widen.h):
// each op, run on half operands, must give its float32 result on the same (widened) values
// rounded once to the half type, and hand-computed values where the op is exact; non-half
// operands (int64 axes, sizes and indices, bool outputs) pass through. Also the wide rows
// of the precision issue: Softmax and LayerNormalization over 4096 values near 300, whose
// sum (1.2e6) overflows float16, stay finite and correct.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/half.h"
#include "runtime/kernels/widen.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

constexpr DType kHalves[] = {DType::kFloat16, DType::kBFloat16};

uint16_t ToBits(DType dt, float f) { return dt == DType::kFloat16 ? FloatToHalf(f) : FloatToBF16(f); }
float FromBits(DType dt, uint16_t h) { return dt == DType::kFloat16 ? HalfToFloat(h) : BF16ToFloat(h); }
float RoundTo(DType dt, double v) { return FromBits(dt, ToBits(dt, static_cast<float>(v))); }

// The float32 twin of a `dt` tensor (exact: every half value is a float32).
TestTensor Float32Of(DType dt, const TestTensor& t) {
  const std::vector<float> v = Widened(dt, t);
  return Floats(t.dims(), v);
}

// |a - b| in units of `dt`'s last place at b; both finite.
double UlpsApart(DType dt, float a, float b) {
  const int mantissa = dt == DType::kFloat16 ? 10 : 7;
  const double ulp = std::ldexp(1.0, std::ilogb(b == 0 ? 1.0f : b) - mantissa);
  return std::fabs(static_cast<double>(a) - b) / ulp;
}

// Runs `op` on half inputs, and on their float32 twins (inputs listed in `float32_inputs`
// and non-half ones are shared). Each half output must hold the float32 output rounded to
// `dt` bit for bit (or within `max_ulps`); other outputs must be equal. Returns the half
// outputs, widened.
std::vector<std::vector<float>> CheckAgainstFloat32(DType dt, std::string_view op, const AttrMap& attrs,
                                                    const std::vector<const TestTensor*>& half_inputs,
                                                    const std::vector<TestTensor*>& outputs, double max_ulps = 0) {
  std::vector<TestTensor> twins;
  twins.reserve(half_inputs.size() + outputs.size());
  std::vector<const TestTensor*> f_in, f_out, h_out;
  for (const TestTensor* t : half_inputs) {
    const bool half = t->ref().present() && t->ref().dtype == dt;
    if (half) twins.push_back(Float32Of(dt, *t));
    f_in.push_back(half ? &twins.back() : t);
  }
  for (TestTensor* t : outputs) {
    const bool half = t->ref().dtype == dt;
    if (half) twins.push_back(Output(DType::kFloat32, t->dims()));
    else twins.push_back(Output(t->ref().dtype, t->dims()));
    f_out.push_back(&twins.back());
    h_out.push_back(t);
  }
  Status st = RunKernel(op, attrs, half_inputs, h_out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  st = RunKernel(op, attrs, f_in, f_out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<std::vector<float>> result;
  for (size_t o = 0; o < outputs.size(); ++o) {
    INFO(op << " output " << o);
    const TensorRef h = outputs[o]->ref();
    if (h.dtype != dt) {
      const size_t bytes = static_cast<size_t>(h.num_elements) * DTypeSize(h.dtype);
      CHECK(std::memcmp(h.data, f_out[o]->ref().data, bytes) == 0);
      result.emplace_back();
      continue;
    }
    const std::vector<float> f = f_out[o]->values<float>();
    const std::vector<uint16_t> bits = outputs[o]->values<uint16_t>();
    for (size_t i = 0; i < f.size(); ++i) {
      INFO("index " << i << ": float32 " << f[i]);
      if (max_ulps == 0) CHECK(bits[i] == ToBits(dt, f[i]));
      else CHECK(UlpsApart(dt, FromBits(dt, bits[i]), RoundTo(dt, f[i])) <= max_ulps);
    }
    result.push_back(Widened(dt, *outputs[o]));
  }
  return result;
}

TEST_CASE("widened unary ops: Sigmoid and Exp in float16 and bfloat16") {
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    auto x = Halves(dt, {5}, {0, 1, -2, 0.5f, 3});
    auto y = Output(dt, {5});
    const auto s = CheckAgainstFloat32(dt, "Sigmoid", {}, {&x}, {&y})[0];
    CHECK(s[0] == 0.5f);
    CHECK(s[1] == RoundTo(dt, 1 / (1 + std::exp(-1.0))));
    const auto e = CheckAgainstFloat32(dt, "Exp", {}, {&x}, {&y})[0];
    CHECK(e[0] == 1.0f);
    CHECK(e[1] == RoundTo(dt, std::exp(1.0)));
  }
}

TEST_CASE("widened Softmax: a row and a 4096-wide row near 300 stay finite and correct") {
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    auto x = Halves(dt, {1, 4}, {1, 2, 3, 4});
    auto y = Output(dt, {1, 4});
    const auto small = CheckAgainstFloat32(dt, "Softmax", {}, {&x}, {&y})[0];
    const double z = std::exp(-3.0) + std::exp(-2.0) + std::exp(-1.0) + 1;
    for (int j = 0; j < 4; ++j) CHECK(UlpsApart(dt, small[j], RoundTo(dt, std::exp(j - 3.0) / z)) <= 1);

    // A constant row: exactly 1/4096 everywhere, though the row sums to 1.2e6.
    constexpr int kN = 4096;
    auto flat = Halves(dt, {2, kN}, std::vector<float>(2 * kN, 300));
    auto yflat = Output(dt, {2, kN});
    REQUIRE(RunKernel("Softmax", {}, {&flat}, {&yflat}).ok());
    for (float v : Widened(dt, yflat)) REQUIRE(v == 1.0f / kN);

    // 300 plus a pattern of 16 steps (0.25 apart in float16, 2 in bfloat16: each value exact),
    // against softmax computed in double.
    const double step = dt == DType::kFloat16 ? 0.25 : 2;
    std::vector<float> v(kN);
    for (int j = 0; j < kN; ++j) v[j] = static_cast<float>(300 + ((j % 16) - 8) * step);
    auto pat = Halves(dt, {1, kN}, v);
    REQUIRE(Widened(dt, pat) == v);
    auto ypat = Output(dt, {1, kN});
    const auto got = CheckAgainstFloat32(dt, "Softmax", {}, {&pat}, {&ypat})[0];
    double sum = 0;
    for (int j = 0; j < kN; ++j) sum += std::exp(v[j] - 300 - 7 * step);
    for (int j = 0; j < kN; ++j) {
      INFO("column " << j);
      REQUIRE(std::isfinite(got[j]));
      CHECK(UlpsApart(dt, got[j], RoundTo(dt, std::exp(v[j] - 300 - 7 * step) / sum)) <= 1);
    }
  }
}

TEST_CASE("widened LayerNormalization: 4096-wide rows near 300 stay finite and correct") {
  constexpr int kN = 4096;
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    std::vector<float> scale_v(kN), bias_v(kN);
    for (int j = 0; j < kN; ++j) {
      scale_v[j] = 0.5f + static_cast<float>(j % 3);
      bias_v[j] = static_cast<float>(j % 5) * 0.5f - 1;
    }
    auto scale = Halves(dt, {kN}, scale_v);
    auto bias = Halves(dt, {kN}, bias_v);
    // A constant row: x - mean is 0, so y is the bias exactly; Mean (float32) is 300.
    auto flat = Halves(dt, {1, kN}, std::vector<float>(kN, 300));
    auto y = Output(dt, {1, kN});
    auto mean = Output(DType::kFloat32, {1, 1});
    AttrMap attrs;
    attrs.SetInt("axis", -1);
    REQUIRE(RunKernel("LayerNormalization", attrs, {&flat, &scale, &bias}, {&y, &mean}).ok());
    CHECK(Widened(dt, y) == bias_v);
    CHECK(mean.values<float>() == std::vector<float>{300});

    // 300 plus a 16-step pattern (exact in dt), against LayerNormalization in double.
    const double step = dt == DType::kFloat16 ? 0.25 : 2;
    std::vector<float> v(kN);
    for (int j = 0; j < kN; ++j) v[j] = static_cast<float>(300 + ((j % 16) - 8) * step);
    auto x = Halves(dt, {1, kN}, v);
    auto yp = Output(dt, {1, kN});
    const auto got = CheckAgainstFloat32(dt, "LayerNormalization", attrs, {&x, &scale, &bias}, {&yp})[0];
    double m = 0, var = 0;
    for (float a : v) m += a;
    m /= kN;
    for (float a : v) var += (a - m) * (a - m);
    var /= kN;
    for (int j = 0; j < kN; ++j) {
      INFO("column " << j);
      const double want = (v[j] - m) / std::sqrt(var + 1e-5) * scale_v[j] + bias_v[j];
      REQUIRE(std::isfinite(got[j]));
      CHECK(UlpsApart(dt, got[j], RoundTo(dt, want)) <= 1);
    }
  }
}

TEST_CASE("widened reductions: ReduceSum rounds once, ReduceMean, int64 axes pass through") {
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    // Where dt's spacing is 2, big + 1 + 1 summed in float32 is big + 2; summing in dt would
    // stay at big (1 is a tie, to even).
    const float big = dt == DType::kFloat16 ? 2048 : 256;
    auto x = Halves(dt, {2, 3}, {big, 1, 1, 1.5f, -2, 4});
    auto axes = Int64s({1}, {1});
    auto y = Output(dt, {2, 1});
    CHECK(CheckAgainstFloat32(dt, "ReduceSum", {}, {&x, &axes}, {&y})[0] == std::vector<float>{big + 2, 3.5f});
    auto x2 = Halves(dt, {2, 2}, {1, 2, 3, 5});
    auto axes0 = Int64s({1}, {0});
    auto y2 = Output(dt, {1, 2});
    CHECK(CheckAgainstFloat32(dt, "ReduceMean", {}, {&x2, &axes0}, {&y2})[0] == std::vector<float>{2, 3.5f});
    // 4096 x 300 overflows float16 only in the result, not on the way to a mean.
    auto wide = Halves(dt, {1, 4096}, std::vector<float>(4096, 300));
    auto mean = Output(dt, {1, 1});
    CHECK(CheckAgainstFloat32(dt, "ReduceMean", {}, {&wide, &axes}, {&mean})[0] == std::vector<float>{300});
  }
}

TEST_CASE("widened pools: MaxPool with int64 Indices and AveragePool") {
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    auto x = Halves(dt, {1, 1, 3, 3}, {1, 5, 2, -1, 0, 7, 3, 3, -4});
    AttrMap attrs;
    attrs.SetInts("kernel_shape", {2, 2});
    auto y = Output(dt, {1, 1, 2, 2});
    auto idx = Output(DType::kInt64, {1, 1, 2, 2});
    const auto max = CheckAgainstFloat32(dt, "MaxPool", attrs, {&x}, {&y, &idx});
    CHECK(max[0] == std::vector<float>{5, 7, 3, 7});
    CHECK(idx.values<int64_t>() == std::vector<int64_t>{1, 5, 6, 5});
    auto avg = Output(dt, {1, 1, 2, 2});
    CHECK(CheckAgainstFloat32(dt, "AveragePool", attrs, {&x}, {&avg})[0] == std::vector<float>{1.25f, 3.5f, 1.25f, 1.5f});
  }
}

TEST_CASE("widened Resize: half X, float32 scales and int64 sizes pass through") {
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    AttrMap linear;
    linear.SetString("mode", "linear");
    auto x = Halves(dt, {1, 1, 2, 2}, {1, 2, 3, 4});
    auto roi = Floats({0}, {});
    auto scales = Floats({4}, {1, 1, 2, 2});
    auto y = Output(dt, {1, 1, 4, 4});
    CHECK(CheckAgainstFloat32(dt, "Resize", linear, {&x, &roi, &scales}, {&y})[0] ==
          std::vector<float>{1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4});
    auto none = Absent();
    auto sizes = Int64s({4}, {1, 1, 4, 4});
    auto y2 = Output(dt, {1, 1, 4, 4});
    REQUIRE(RunKernel("Resize", linear, {&x, &none, &none, &sizes}, {&y2}).ok());
    CHECK(y2.values<uint16_t>() == y.values<uint16_t>());
  }
}

TEST_CASE("widened Gemm with alpha, beta, transB and a broadcast C") {
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    AttrMap attrs;
    attrs.SetFloat("alpha", 2);
    attrs.SetFloat("beta", 0.5f);
    attrs.SetInt("transB", 1);
    auto a = Halves(dt, {2, 2}, {1, 2, 3, 4});
    auto b = Halves(dt, {2, 2}, {1, 0, -1, 1});  // B^T = [[1, -1], [0, 1]]
    auto c = Halves(dt, {2}, {4, -2});
    auto y = Output(dt, {2, 2});
    // A B^T = [[1, 1], [3, 1]]; 2 A B^T + 0.5 C.
    CHECK(CheckAgainstFloat32(dt, "Gemm", attrs, {&a, &b, &c}, {&y})[0] == std::vector<float>{4, 1, 8, 1});
  }
}

TEST_CASE("widened variadic Sum and Mean over 40 inputs round once, Concat moves halves itself") {
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    // 40 operands: more than KernelWorkspaceBytes keeps on its stack, all in the workspace.
    const float big = dt == DType::kFloat16 ? 2048 : 256;
    std::vector<TestTensor> parts;
    parts.push_back(Halves(dt, {2}, {big, -1}));
    for (int i = 1; i < 40; ++i) parts.push_back(Halves(dt, {2}, {1, 0.5f}));
    std::vector<const TestTensor*> in;
    for (const TestTensor& t : parts) in.push_back(&t);
    auto y = Output(dt, {2});
    // big + 39 is a tie between the even big + 40 and the odd big + 38.
    CHECK(CheckAgainstFloat32(dt, "Sum", {}, in, {&y})[0] == std::vector<float>{big + 40, 18.5f});
    auto mean = Output(dt, {2});
    const auto m = CheckAgainstFloat32(dt, "Mean", {}, in, {&mean})[0];
    CHECK(m[0] == RoundTo(dt, (big + 39) / 40.0));
    CHECK(m[1] == RoundTo(dt, 18.5 / 40));

    auto cat = Output(dt, {80});
    AttrMap axis0;
    axis0.SetInt("axis", 0);
    REQUIRE(RunKernel("Concat", axis0, in, {&cat}).ok());
    const auto c = Widened(dt, cat);
    CHECK(c[0] == big);
    CHECK(c[79] == 0.5f);
  }
}

TEST_CASE("widened ops with int and bool operands: ArgMax, Less, TopK, OneHot") {
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    auto x = Halves(dt, {2, 3}, {1, 7, -3, 2, 2, 9});
    AttrMap axis1;
    axis1.SetInt("axis", 1);
    auto am = Output(DType::kInt64, {2, 1});
    CheckAgainstFloat32(dt, "ArgMax", axis1, {&x}, {&am});
    CHECK(am.values<int64_t>() == std::vector<int64_t>{1, 2});

    auto b = Halves(dt, {3}, {2, 2, 2});
    auto less = Output(DType::kBool, {2, 3});
    CheckAgainstFloat32(dt, "Less", {}, {&x, &b}, {&less});
    CHECK(less.values<uint8_t>() == std::vector<uint8_t>{1, 0, 1, 0, 0, 0});

    auto k = Int64s({1}, {2});
    auto values = Output(dt, {2, 2});
    auto indices = Output(DType::kInt64, {2, 2});
    CHECK(CheckAgainstFloat32(dt, "TopK", {}, {&x, &k}, {&values, &indices})[0] == std::vector<float>{7, 1, 9, 2});
    CHECK(indices.values<int64_t>() == std::vector<int64_t>{1, 0, 2, 0});

    // Half indices and depth are numbers to OneHot: widened, they read as 2 and 3, not 0.
    auto idx = Halves(dt, {2}, {2, -1});
    auto depth = Halves(dt, {1}, {3});
    auto on_off = Halves(dt, {2}, {0.5f, 4});
    auto oh = Output(dt, {2, 3});
    CHECK(CheckAgainstFloat32(dt, "OneHot", {}, {&idx, &depth, &on_off}, {&oh})[0] ==
          std::vector<float>{0.5f, 0.5f, 4, 0.5f, 0.5f, 4});
  }
}

TEST_CASE("Gather moves float16 rows itself with int64 indices") {
  auto data = Halves(DType::kFloat16, {3, 2}, {1, 2, 3, 4, 5, 6});
  auto idx = Int64s({2}, {2, 0});
  auto y = Output(DType::kFloat16, {2, 2});
  REQUIRE(RunKernel("Gather", {}, {&data, &idx}, {&y}).ok());
  CHECK(Widened(DType::kFloat16, y) == std::vector<float>{5, 6, 1, 2});
}

// The kernels marked KernelDef::halves that compute (rather than move bytes) read and write
// halves themselves, some in double: their half results must match their own float32 results
// rounded to the half type, to one unit in the last place (double versus float32 rounding).
TEST_CASE("kernels with KernelDef::halves agree on half operands with their float32 results") {
  for (const char* op : {"Einsum", "LpNormalization", "MeanVarianceNormalization", "LRN", "RMSNormalization",
                         "CumSum", "CumProd", "Range", "Trilu", "EyeLike", "DequantizeLinear", "QuantizeLinear",
                         "IsNaN", "NonZero", "Gather", "Concat", "Where", "Add", "Max"}) {
    const KernelDef* k = FindKernel(op);
    REQUIRE(k);
    CHECK_MESSAGE(k->halves, std::string(op));
  }
  for (DType dt : kHalves) {
    INFO(DTypeName(dt));
    auto a = Halves(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
    auto b = Halves(dt, {3, 2}, {0.5f, -1, 2, 0.25f, 1, 3});
    AttrMap eq;
    eq.SetString("equation", "ij,jk->ik");
    auto mm = Output(dt, {2, 2});
    CHECK(CheckAgainstFloat32(dt, "Einsum", eq, {&a, &b}, {&mm}, 1)[0] == std::vector<float>{7.5f, 8.5f, 18, 15.25f});

    auto x = Halves(dt, {2, 3}, {3, 4, 0, 1, 2, -2});
    auto y = Output(dt, {2, 3});
    CHECK(CheckAgainstFloat32(dt, "LpNormalization", {}, {&x}, {&y}, 1)[0] ==
          std::vector<float>{RoundTo(dt, 0.6), RoundTo(dt, 0.8), 0, RoundTo(dt, 1 / 3.0), RoundTo(dt, 2 / 3.0), RoundTo(dt, -2 / 3.0)});
    auto x4 = Halves(dt, {1, 2, 1, 3}, {1, 2, 3, -1, 5, 0.5f});
    auto y4 = Output(dt, {1, 2, 1, 3});
    CheckAgainstFloat32(dt, "MeanVarianceNormalization", {}, {&x4}, {&y4}, 1);
    AttrMap lrn;
    lrn.SetInt("size", 3);
    auto xl = Halves(dt, {1, 3, 2, 1}, {1, -2, 3, 0.5f, 4, 2});
    auto yl = Output(dt, {1, 3, 2, 1});
    CheckAgainstFloat32(dt, "LRN", lrn, {&xl}, {&yl}, 1);
    auto scale = Halves(dt, {3}, {1, 2, 0.5f});
    CheckAgainstFloat32(dt, "RMSNormalization", {}, {&x, &scale}, {&y}, 1);

    auto v = Halves(dt, {5}, {1, 2, 3, 4, 0.5f});
    auto axis = Int64s({}, {0});
    auto cum = Output(dt, {5});
    CHECK(CheckAgainstFloat32(dt, "CumSum", {}, {&v, &axis}, {&cum}, 1)[0] == std::vector<float>{1, 3, 6, 10, 10.5f});
    CHECK(CheckAgainstFloat32(dt, "CumProd", {}, {&v, &axis}, {&cum}, 1)[0] == std::vector<float>{1, 2, 6, 24, 12});

    auto start = Halves(dt, {}, {1}), limit = Halves(dt, {}, {4}), delta = Halves(dt, {}, {0.5f});
    auto r = Output(dt, {6});
    CHECK(CheckAgainstFloat32(dt, "Range", {}, {&start, &limit, &delta}, {&r})[0] ==
          std::vector<float>{1, 1.5f, 2, 2.5f, 3, 3.5f});

    auto sq = Halves(dt, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    auto tri = Output(dt, {3, 3});
    CHECK(CheckAgainstFloat32(dt, "Trilu", {}, {&sq}, {&tri})[0] == std::vector<float>{1, 2, 3, 0, 5, 6, 0, 0, 9});
    auto eye = Output(dt, {3, 3});
    CHECK(CheckAgainstFloat32(dt, "EyeLike", {}, {&sq}, {&eye})[0] == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});

    auto q = Make<int8_t>({4}, {-3, 0, 5, 127});
    auto qs = Halves(dt, {}, {0.5f});
    auto qz = Make<int8_t>({}, {1});
    auto dq = Output(dt, {4});
    CHECK(CheckAgainstFloat32(dt, "DequantizeLinear", {}, {&q, &qs, &qz}, {&dq})[0] == std::vector<float>{-2, -0.5f, 2, 63});
    auto qx = Halves(dt, {4}, {1, 2.5f, -3, 100});
    auto qy = Output(DType::kInt8, {4});
    CheckAgainstFloat32(dt, "QuantizeLinear", {}, {&qx, &qs, &qz}, {&qy});
    CHECK(qy.values<int8_t>() == std::vector<int8_t>{3, 6, -5, 127});

    auto special = Halves(dt, {4}, {1, NAN, INFINITY, -INFINITY});
    auto nan = Output(DType::kBool, {4});
    CheckAgainstFloat32(dt, "IsNaN", {}, {&special}, {&nan});
    CHECK(nan.values<uint8_t>() == std::vector<uint8_t>{0, 1, 0, 0});
    auto nz_in = Halves(dt, {2, 3}, {0, 1, 0, 2, -0.0f, -1});
    auto nz = Output(DType::kInt64, {2, 3});
    CheckAgainstFloat32(dt, "NonZero", {}, {&nz_in}, {&nz});
    CHECK(nz.values<int64_t>() == std::vector<int64_t>{0, 1, 1, 1, 0, 2});
  }
}

TEST_CASE("KernelWorkspaceBytes: float32 calls cost nothing extra, half calls add 64-byte aligned float32 copies") {
  const KernelDef* sigmoid = FindKernel("Sigmoid");
  const KernelDef* concat = FindKernel("Concat");
  REQUIRE(sigmoid);
  REQUIRE(concat);
  CHECK_FALSE(sigmoid->halves);
  CHECK(concat->halves);
  auto xf = Floats({1000}, {});
  auto xh = Halves(DType::kFloat16, {1000}, {});
  const TensorRef f[] = {xf.ref(), xf.ref()}, h[] = {xh.ref(), xh.ref()};
  CHECK(KernelWorkspaceBytes(*sigmoid, {}, {f, 1}, {f + 1, 1}) == 0);
  CHECK(KernelWorkspaceBytes(*concat, {}, {h, 1}, {h + 1, 1}) == 0);
  const size_t refs = (2 * sizeof(TensorRef) + 63) / 64 * 64;
  CHECK(KernelWorkspaceBytes(*sigmoid, {}, {h, 1}, {h + 1, 1}) == 63 + refs + 2 * 4032);
  // A kernel's own workspace is added, sized on the float32 view (Conv's im2col columns).
  const KernelDef* conv = FindKernel("Conv");
  auto x = Halves(DType::kBFloat16, {1, 2, 5}, {}), w = Halves(DType::kBFloat16, {3, 2, 3}, {});
  auto y = Output(DType::kBFloat16, {1, 3, 3});
  auto xf32 = Floats({1, 2, 5}, {}), wf32 = Floats({3, 2, 3}, {});
  auto yf32 = Output(DType::kFloat32, {1, 3, 3});
  const TensorRef half_in[] = {x.ref(), w.ref()}, half_out[] = {y.ref()};
  const TensorRef f32_in[] = {xf32.ref(), wf32.ref()}, f32_out[] = {yf32.ref()};
  const size_t own = KernelWorkspaceBytes(*conv, {}, f32_in, f32_out);
  CHECK(own > 0);
  // X: 10 floats (40 bytes, rounded to 64), W: 18 (72 -> 128), Y: 9 (36 -> 64).
  CHECK(KernelWorkspaceBytes(*conv, {}, half_in, half_out) == 63 + (3 * sizeof(TensorRef) + 63) / 64 * 64 + 256 + own);
}

TEST_CASE("RunKernel: too small a workspace is a precise error and leaves the output alone, kernel errors say they ran widened") {
  const KernelDef* sigmoid = FindKernel("Sigmoid");
  auto x = Halves(DType::kFloat16, {1000}, std::vector<float>(1000, 1));
  auto y = Halves(DType::kFloat16, {1000}, std::vector<float>(1000, 7));
  const TensorRef in[] = {x.ref()}, out[] = {y.ref()};
  const size_t need = KernelWorkspaceBytes(*sigmoid, {}, in, out);
  std::vector<uint8_t> ws(need);
  for (size_t given : {size_t{0}, size_t{10}, need - 1}) {
    INFO("given " << given);
    const AttrMap attrs;
    const KernelCall call{attrs, in, out, given ? ws.data() : nullptr, given};
    Status st = RunKernel(*sigmoid, call);
    CHECK(st.code() == StatusCode::kInternal);
    CHECK(st.message() == "Sigmoid: widening float16/bfloat16 operands to float32 needs " + std::to_string(need) +
                              " bytes of workspace, " + std::to_string(given) + " given");
    CHECK(Widened(DType::kFloat16, y) == std::vector<float>(1000, 7));
  }
  // Any alignment of exactly `need` bytes is enough.
  std::vector<uint8_t> big(need + 64);
  for (size_t shift : {0, 1, 8, 63}) {
    const AttrMap attrs;
    const KernelCall call{attrs, in, out, big.data() + shift, need};
    REQUIRE(RunKernel(*sigmoid, call).ok());
    CHECK(Widened(DType::kFloat16, y)[0] == RoundTo(DType::kFloat16, 1 / (1 + std::exp(-1.0))));
  }
  // A kernel's own error keeps its code and says the dtypes it names are the float32 view.
  auto x2 = Halves(DType::kBFloat16, {2, 3}, {});
  auto y2 = Output(DType::kBFloat16, {2, 2});
  Status st = RunKernel("Softmax", {}, {&x2}, {&y2});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("Softmax") == 0);
  CHECK(st.message().ends_with(" (its float16/bfloat16 operands widened to float32)"));
}

}  // namespace
}  // namespace kiln::cpu::testing
