// Attention, RotaryEmbedding, RMSNormalization and LinearAttention on inputs small enough to check
// by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "runtime/half.h"
#include "tests/random_floats.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// With scale = ln 3, a score of 1 against 0 weighs 3 : 1 after the softmax.
const float kLn3 = std::log(3.0f);

AttrMap ScaleLn3() {
  AttrMap a;
  a.SetFloat("scale", kLn3);
  return a;
}

// One head, two queries, two keys: Q = K = I, V = [[1,2],[3,4]]. Query 0 weighs the keys
// 3 : 1, so Y[0] = 0.75*[1,2] + 0.25*[3,4] = [1.5, 2.5]; query 1 weighs them 1 : 3.
struct OneHead {
  TestTensor q = Floats({1, 1, 2, 2}, {1, 0, 0, 1});
  TestTensor k = Floats({1, 1, 2, 2}, {1, 0, 0, 1});
  TestTensor v = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
};

TEST_CASE("Attention: one head, 2x2, scale ln 3") {
  OneHead in;
  auto y = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("Attention", ScaleLn3(), {&in.q, &in.k, &in.v}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1.5f, 2.5f, 2.5f, 3.5f}));
  // The default scale is 1/sqrt(head size): weights e^(1/sqrt 2) : 1 for query 0.
  auto y2 = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("Attention", {}, {&in.q, &in.k, &in.v}, {&y2}).ok());
  const float p = std::exp(1 / std::sqrt(2.0f)) / (std::exp(1 / std::sqrt(2.0f)) + 1);
  KILN_CHECK_FLOATS(y2.values<float>(), (std::vector<float>{p + 3 * (1 - p), 2 * p + 4 * (1 - p),
                                                             (1 - p) + 3 * p, 2 * (1 - p) + 4 * p}));
}

TEST_CASE("Attention: causal, bool mask with a fully masked row, qk_matmul_output modes") {
  OneHead in;
  AttrMap causal = ScaleLn3();
  causal.SetInt("is_causal", 1);
  auto y = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("Attention", causal, {&in.q, &in.k, &in.v}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1, 2, 2.5f, 3.5f}));  // query 0 sees key 0 only

  // Row 1 has no key left: its probabilities and output are zero, not NaN.
  auto mask = Bools({2, 2}, {true, false, false, false});
  AttrMap probs = ScaleLn3();
  probs.SetInt("qk_matmul_output_mode", 3);
  auto absent = Absent();
  auto y3 = Output(DType::kFloat32, {1, 1, 2, 2});
  auto qk = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("Attention", probs, {&in.q, &in.k, &in.v, &mask}, {&y3, &absent, &absent, &qk}).ok());
  KILN_CHECK_FLOATS(y3.values<float>(), (std::vector<float>{1, 2, 0, 0}));
  KILN_CHECK_FLOATS(qk.values<float>(), (std::vector<float>{1, 0, 0, 0}));

  // softcap 1: scores [1, 0] become [tanh 1, 0]; mode 0 is the product, 1 after the softcap,
  // 2 after the float mask [0, -1] is added.
  AttrMap capped;
  capped.SetFloat("scale", 1.0f);
  capped.SetFloat("softcap", 1.0f);
  auto fmask = Floats({1, 2}, {0, -1});
  const float t1 = std::tanh(1.0f);
  const std::vector<std::vector<float>> want = {{1, 0, 0, 1}, {t1, 0, 0, t1}, {t1, -1, 0, t1 - 1}};
  for (int mode = 0; mode < 3; ++mode) {
    capped.SetInt("qk_matmul_output_mode", mode);
    auto yc = Output(DType::kFloat32, {1, 1, 2, 2});
    auto qkc = Output(DType::kFloat32, {1, 1, 2, 2});
    REQUIRE(RunKernel("Attention", capped, {&in.q, &in.k, &in.v, &fmask}, {&yc, &absent, &absent, &qkc}).ok());
    KILN_CHECK_FLOATS(qkc.values<float>(), want[mode]);
    const float p = std::exp(t1 - 0) / (std::exp(t1) + std::exp(-1.0f));  // query 0, key 0
    CHECK(yc.values<float>()[0] == doctest::Approx(p * 1 + (1 - p) * 3));
  }
}

TEST_CASE("Attention: a mask shorter than the keys, and nonpad_kv_seqlen") {
  OneHead in;
  // Keys past the mask's last dim are masked: both queries see key 0 only.
  auto short_mask = Floats({2, 1}, {0, 0});
  auto y = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("Attention", ScaleLn3(), {&in.q, &in.k, &in.v, &short_mask}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1, 2, 1, 2}));

  // One valid key; with is_causal the frontier is i + nonpad - q_seq = i - 1, so query 0
  // sees nothing (zero row) and query 1 sees key 0.
  auto absent = Absent();
  auto nonpad = Int64s({1}, {1});
  auto y2 = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("Attention", ScaleLn3(), {&in.q, &in.k, &in.v, &absent, &absent, &absent, &nonpad}, {&y2}).ok());
  KILN_CHECK_FLOATS(y2.values<float>(), (std::vector<float>{1, 2, 1, 2}));
  AttrMap causal = ScaleLn3();
  causal.SetInt("is_causal", 1);
  REQUIRE(RunKernel("Attention", causal, {&in.q, &in.k, &in.v, &absent, &absent, &absent, &nonpad}, {&y2}).ok());
  KILN_CHECK_FLOATS(y2.values<float>(), (std::vector<float>{0, 0, 1, 2}));
}

TEST_CASE("Attention: past key/value, present outputs, causal offset by the past") {
  OneHead in;
  auto q = Floats({1, 1, 1, 2}, {1, 0});
  auto past_k = Floats({1, 1, 1, 2}, {0, 0});
  auto past_v = Floats({1, 1, 1, 2}, {10, 20});
  auto absent = Absent();
  // Keys [0,0], [1,0], [0,1] score 0, ln 3, 0: weights 1 : 3 : 1.
  auto y = Output(DType::kFloat32, {1, 1, 1, 2});
  auto pk = Output(DType::kFloat32, {1, 1, 3, 2});
  auto pv = Output(DType::kFloat32, {1, 1, 3, 2});
  REQUIRE(RunKernel("Attention", ScaleLn3(), {&q, &in.k, &in.v, &absent, &past_k, &past_v}, {&y, &pk, &pv}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{16.0f / 5, 30.0f / 5}));
  KILN_CHECK_FLOATS(pk.values<float>(), (std::vector<float>{0, 0, 1, 0, 0, 1}));
  KILN_CHECK_FLOATS(pv.values<float>(), (std::vector<float>{10, 20, 1, 2, 3, 4}));
  // Causal: query 0 of this block is position 1, so it sees keys 0 and 1 (weights 1 : 3).
  AttrMap causal = ScaleLn3();
  causal.SetInt("is_causal", 1);
  REQUIRE(RunKernel("Attention", causal, {&q, &in.k, &in.v, &absent, &past_k, &past_v}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{13.0f / 4, 26.0f / 4}));
}

TEST_CASE("Attention: 3-D inputs with grouped-query heads (2 q heads share 1 kv head)") {
  auto q = Floats({1, 2, 4}, {1, 0, 0, 1, 0, 1, 1, 0});  // [batch, seq, heads * head]
  auto k = Floats({1, 2, 2}, {1, 0, 0, 1});
  auto v = Floats({1, 2, 2}, {1, 2, 3, 4});
  AttrMap a = ScaleLn3();
  a.SetInt("q_num_heads", 2);
  a.SetInt("kv_num_heads", 1);
  auto y = Output(DType::kFloat32, {1, 2, 4});
  REQUIRE(RunKernel("Attention", a, {&q, &k, &v}, {&y}).ok());
  // Token 0: head 0 is [1,0] -> [1.5,2.5], head 1 is [0,1] -> [2.5,3.5]; token 1 the reverse.
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1.5f, 2.5f, 2.5f, 3.5f, 2.5f, 3.5f, 1.5f, 2.5f}));
}

TEST_CASE("Attention: float16 storage, and bad inputs") {
  auto half = [](std::vector<int64_t> dims, std::vector<float> v) {
    TestTensor t(DType::kFloat16, std::move(dims), 2);
    for (size_t i = 0; i < v.size(); ++i) t.data<uint16_t>()[i] = FloatToHalf(v[i]);
    return t;
  };
  auto q = half({1, 1, 2, 2}, {1, 0, 0, 1});
  auto k = half({1, 1, 2, 2}, {1, 0, 0, 1});
  auto v = half({1, 1, 2, 2}, {1, 2, 3, 4});
  auto y = Output(DType::kFloat16, {1, 1, 2, 2});
  REQUIRE(RunKernel("Attention", ScaleLn3(), {&q, &k, &v}, {&y}).ok());
  std::vector<float> got;
  for (uint16_t h : y.values<uint16_t>()) got.push_back(HalfToFloat(h));
  KILN_CHECK_FLOATS(got, (std::vector<float>{1.5f, 2.5f, 2.5f, 3.5f}));

  OneHead in;
  auto y32 = Output(DType::kFloat32, {1, 1, 2, 2});
  auto int_mask = Int64s({2, 2}, {0, 0, 0, 0});
  CHECK(RunKernel("Attention", {}, {&in.q, &in.k, &in.v, &int_mask}, {&y32}).message() ==
        "Attention: attn_mask [2, 2] int64 must be bool or Q's dtype and broadcast to [1, 1, 2, at most 2]");
  auto k3 = Floats({1, 2, 2}, {});
  CHECK(RunKernel("Attention", {}, {&in.q, &k3, &in.v}, {&y32}).message() ==
        "Attention: Q, K and V must all be 3-D or all 4-D, got [1, 1, 2, 2], [1, 2, 2], [1, 1, 2, 2]");
  auto q3 = Floats({1, 2, 4}, {});
  CHECK(RunKernel("Attention", {}, {&q3, &k3, &k3}, {&y32}).message() ==
        "Attention: q_num_heads 0 and kv_num_heads 0 must divide the hidden sizes of [1, 2, 4], [1, 2, 2], [1, 2, 2]");
}

// Rotary on one head of 4 values, x = [1,2,3,4], at position 1 whose angles are pi/2 (first
// pair) and 0 (second pair): a pair (x1, x2) at pi/2 becomes (-x2, x1).
// softmax(scale Q K^T + mask) V in float64, per (b, h, query row); a row whose every key is
// masked (-inf) gives zeros, as ONNX's Attention does.
std::vector<float> ReferenceAttention(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, const std::vector<float>* mask, int64_t heads,
                                      int64_t sq, int64_t t, int64_t d, int64_t dv, double scale, bool causal) {
  std::vector<float> y(static_cast<size_t>(heads * sq * dv));
  std::vector<double> s(static_cast<size_t>(t));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i) {
      double max = -INFINITY;
      for (int64_t j = 0; j < t; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += double{q[(h * sq + i) * d + e]} * k[(h * t + j) * d + e];
        s[j] = scale * dot + (mask ? (*mask)[i * t + j] : 0.0) + (causal && j > i ? -INFINITY : 0.0);
        max = std::max(max, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < t; ++j) sum += s[j] = max == -INFINITY ? 0 : std::exp(s[j] - max);
      for (int64_t e = 0; e < dv; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < t; ++j) acc += s[j] * v[(h * t + j) * dv + e];
        y[(h * sq + i) * dv + e] = static_cast<float>(sum == 0 ? 0 : acc / sum);
      }
    }
  return y;
}

// 130 queries and 1100 keys cross the kernel's tiles (64 queries, 512 keys), so the online
// softmax rescales rows between key tiles; head sizes 20 and 24 are not powers of two. The
// mask holds -inf entries, one row masked throughout and one masked but for its last key (in
// the last tile), against the float64 reference.
TEST_CASE("Attention: tiles of queries and keys (online softmax) against float64, with masks and causal") {
  const int64_t heads = 2, sq = 130, t = 1100, d = 20, dv = 24;
  const std::vector<float> qv = kiln::testing::RandomFloats(heads * sq * d, 11);
  const std::vector<float> kv = kiln::testing::RandomFloats(heads * t * d, 12);
  const std::vector<float> vv = kiln::testing::RandomFloats(heads * t * dv, 13);
  std::vector<float> mv = kiln::testing::RandomFloats(sq * t, 14, -3.0f, 1.0f);
  for (size_t i = 0; i < mv.size(); i += 7) mv[i] = -INFINITY;
  for (int64_t j = 0; j < t; ++j) mv[5 * t + j] = -INFINITY, mv[70 * t + j] = j == t - 1 ? 0.0f : -INFINITY;
  auto q = Floats({1, heads, sq, d}, qv), k = Floats({1, heads, t, d}, kv), v = Floats({1, heads, t, dv}, vv);
  auto mask = Floats({sq, t}, mv);
  const double scale = 0.3;
  AttrMap attrs;
  attrs.SetFloat("scale", static_cast<float>(scale));
  auto check = [&](const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(got[i] - want[i]) <= 2e-5f + 2e-5f * std::fabs(want[i]));
    CHECK(bad == 0);
  };
  auto y = Output(DType::kFloat32, {1, heads, sq, dv});
  REQUIRE(RunKernel("Attention", attrs, {&q, &k, &v, &mask}, {&y}).ok());
  const std::vector<float> want = ReferenceAttention(qv, kv, vv, &mv, heads, sq, t, d, dv, scale, false);
  check(y.values<float>(), want);
  CHECK(y.values<float>()[5 * dv] == 0.0f);  // row 5 of head 0: every key masked
  CHECK(y.values<float>()[70 * dv] == doctest::Approx(vv[(t - 1) * dv]).epsilon(1e-6));  // only the last key

  // Kiln's masked_rows_nan (attention the compiler made of a Softmax): NaN for row 5, as the
  // Softmax of a row of -inf gives, and every other row as before; across tiles and in one.
  AttrMap nan_rows = attrs;
  nan_rows.SetInt("masked_rows_nan", 1);
  auto yn = Output(DType::kFloat32, {1, heads, sq, dv});
  REQUIRE(RunKernel("Attention", nan_rows, {&q, &k, &v, &mask}, {&yn}).ok());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t e = 0; e < dv; ++e) {
        const size_t at = static_cast<size_t>((h * sq + i) * dv + e);
        if (i == 5) REQUIRE(std::isnan(yn.values<float>()[at]));
        else REQUIRE(yn.values<float>()[at] == y.values<float>()[at]);
      }
  const int64_t short_t = 300;  // every key in one tile
  auto ks = Floats({1, heads, short_t, d}, std::vector<float>(kv.begin(), kv.begin() + heads * short_t * d));
  auto vs = Floats({1, heads, short_t, dv}, std::vector<float>(vv.begin(), vv.begin() + heads * short_t * dv));
  std::vector<float> ms(static_cast<size_t>(sq * short_t), 0.0f);
  for (int64_t j = 0; j < short_t; ++j) ms[static_cast<size_t>(9 * short_t + j)] = -INFINITY;
  auto mask_s = Floats({sq, short_t}, ms);
  auto y1 = Output(DType::kFloat32, {1, heads, sq, dv}), y1n = Output(DType::kFloat32, {1, heads, sq, dv});
  REQUIRE(RunKernel("Attention", attrs, {&q, &ks, &vs, &mask_s}, {&y1}).ok());
  REQUIRE(RunKernel("Attention", nan_rows, {&q, &ks, &vs, &mask_s}, {&y1n}).ok());
  CHECK(y1.values<float>()[9 * dv] == 0.0f);
  CHECK(std::isnan(y1n.values<float>()[9 * dv]));
  CHECK(y1n.values<float>()[10 * dv] == y1.values<float>()[10 * dv]);

  AttrMap causal = attrs;
  causal.SetInt("is_causal", 1);
  auto yc = Output(DType::kFloat32, {1, heads, sq, dv});
  REQUIRE(RunKernel("Attention", causal, {&q, &k, &v}, {&yc}).ok());
  check(yc.values<float>(), ReferenceAttention(qv, kv, vv, nullptr, heads, sq, t, d, dv, scale, true));
}

// Kiln's packed_qkv: each input [B, S, 3 * H * D], Q, K and V its column thirds (timm's qkv
// Linear), against the float64 reference on the heads taken apart; float32 is read in place,
// float16 gathered first. Batch 2, so the batch stride (3 * S * H * D) is crossed.
TEST_CASE("Attention: packed_qkv reads Q, K and V as the thirds of one [B, S, 3*H*D] tensor") {
  const int64_t batch = 2, heads = 3, s = 70, d = 16, width = 3 * heads * d;
  const std::vector<float> xv = kiln::testing::RandomFloats(batch * s * width, 21);
  auto x = Floats({batch, s, width}, xv);
  AttrMap attrs;
  attrs.SetFloat("scale", 0.25f);
  attrs.SetInt("q_num_heads", heads);
  attrs.SetInt("kv_num_heads", heads);
  attrs.SetInt("packed_qkv", 1);
  auto y = Output(DType::kFloat32, {batch, s, heads * d});
  REQUIRE(RunKernel("Attention", attrs, {&x, &x, &x}, {&y}).ok());
  auto h16 = [](const std::vector<float>& v) {  // through float16, as the float16 run sees it
    std::vector<float> r;
    for (float f : v) r.push_back(HalfToFloat(FloatToHalf(f)));
    return r;
  };
  TestTensor x16(DType::kFloat16, {batch, s, width}, 2);
  for (size_t i = 0; i < xv.size(); ++i) x16.data<uint16_t>()[i] = FloatToHalf(xv[i]);
  auto y16 = Output(DType::kFloat16, {batch, s, heads * d});
  REQUIRE(RunKernel("Attention", attrs, {&x16, &x16, &x16}, {&y16}).ok());
  const std::vector<float> x_half = h16(xv);
  for (int64_t b = 0; b < batch; ++b) {
    // part p of head h, row i: x[b, i, p * H * D + h * D + e], as [H, S, D]
    auto part = [&](const std::vector<float>& src, int64_t p) {
      std::vector<float> r(static_cast<size_t>(heads * s * d));
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t e = 0; e < d; ++e)
            r[static_cast<size_t>((h * s + i) * d + e)] = src[static_cast<size_t>((b * s + i) * width + p * heads * d + h * d + e)];
      return r;
    };
    const std::vector<float> want = ReferenceAttention(part(xv, 0), part(xv, 1), part(xv, 2), nullptr, heads, s, s, d, d, 0.25, false);
    const std::vector<float> want16 =
        ReferenceAttention(part(x_half, 0), part(x_half, 1), part(x_half, 2), nullptr, heads, s, s, d, d, 0.25, false);
    int bad = 0, bad16 = 0;
    for (int64_t i = 0; i < s; ++i)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < d; ++e) {
          const float w = want[static_cast<size_t>((h * s + i) * d + e)], w16 = want16[static_cast<size_t>((h * s + i) * d + e)];
          const size_t at = static_cast<size_t>((b * s + i) * heads * d + h * d + e);  // Y [B, S, H * D]
          bad += !(std::fabs(y.values<float>()[at] - w) <= 2e-5f + 2e-5f * std::fabs(w));
          // float16 Y: its rounding (2^-11 relative) on a float32 computation of float16 inputs
          bad16 += !(std::fabs(HalfToFloat(y16.values<uint16_t>()[at]) - w16) <= 1e-3f * (1 + std::fabs(w16)));
        }
    CHECK(bad == 0);
    CHECK(bad16 == 0);
  }
  // Bad forms: a width that is not three parts of the heads, unequal head counts, 4-D inputs.
  auto odd = Floats({1, 2, 8}, std::vector<float>(16, 0.0f));
  auto y_odd = Output(DType::kFloat32, {1, 2, 2});
  CHECK(RunKernel("Attention", attrs, {&odd, &odd, &odd}, {&y_odd}).message() ==
        "Attention: packed_qkv needs Q, K and V 3-D, each [batch, sequence, 3 * hidden], got [1, 2, 8], [1, 2, 8], [1, 2, 8]");
  AttrMap gqa = attrs;
  gqa.SetInt("kv_num_heads", 1);
  CHECK(RunKernel("Attention", gqa, {&x, &x, &x}, {&y}).message() ==
        "Attention: packed_qkv needs q_num_heads and kv_num_heads equal, got 3 and 1");
  auto q4 = Floats({1, 1, 2, 6}, std::vector<float>(12, 0.0f));
  auto y4 = Output(DType::kFloat32, {1, 1, 2, 2});
  CHECK(RunKernel("Attention", attrs, {&q4, &q4, &q4}, {&y4}).message() ==
        "Attention: packed_qkv needs Q, K and V 3-D, each [batch, sequence, 3 * hidden], got [1, 1, 2, 6], [1, 1, 2, 6], [1, 1, 2, 6]");
}

TEST_CASE("RotaryEmbedding: halves, interleaved, partial rotation, 3-D input") {
  auto x = Floats({1, 1, 1, 4}, {1, 2, 3, 4});
  auto cos = Floats({2, 2}, {1, 1, 0, 1});  // positions 0 and 1
  auto sin = Floats({2, 2}, {0, 0, 1, 0});
  auto pos = Int64s({1, 1}, {1});
  auto y = Output(DType::kFloat32, {1, 1, 1, 4});
  REQUIRE(RunKernel("RotaryEmbedding", {}, {&x, &cos, &sin, &pos}, {&y}).ok());
  // Pairs (x0, x2) = (1, 3) at pi/2 -> (-3, 1); (x1, x3) = (2, 4) at 0 stays.
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-3, 2, 1, 4}));
  AttrMap il;
  il.SetInt("interleaved", 1);
  REQUIRE(RunKernel("RotaryEmbedding", il, {&x, &cos, &sin, &pos}, {&y}).ok());
  // Pairs (x0, x1) = (1, 2) at pi/2 -> (-2, 1); (x2, x3) stays.
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-2, 1, 3, 4}));

  // rotary_embedding_dim 2: only (x0, x1) turns, the caches have one angle per position;
  // without position_ids the caches are per [batch, sequence].
  AttrMap part;
  part.SetInt("rotary_embedding_dim", 2);
  auto cos1 = Floats({1, 1, 1}, {0});
  auto sin1 = Floats({1, 1, 1}, {1});
  REQUIRE(RunKernel("RotaryEmbedding", part, {&x, &cos1, &sin1}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-2, 1, 3, 4}));

  // 3-D [batch, seq, heads * head] with 2 heads of 2: each head turns by pi/2.
  AttrMap heads;
  heads.SetInt("num_heads", 2);
  auto x3 = Floats({1, 1, 4}, {1, 2, 3, 4});
  auto y3 = Output(DType::kFloat32, {1, 1, 4});
  REQUIRE(RunKernel("RotaryEmbedding", heads, {&x3, &cos1, &sin1}, {&y3}).ok());
  KILN_CHECK_FLOATS(y3.values<float>(), (std::vector<float>{-2, 1, -4, 3}));

  auto far = Int64s({1, 1}, {2});
  CHECK(RunKernel("RotaryEmbedding", {}, {&x, &cos, &sin, &far}, {&y}).message() ==
        "RotaryEmbedding: position_ids[0,0] = 2 is outside the caches' 2 positions");
  CHECK(RunKernel("RotaryEmbedding", {}, {&x, &cos1, &sin1}, {&y}).message() ==
        "RotaryEmbedding: caches [1, 1, 1], [1, 1, 1] and position_ids <absent> do not fit X [1, 1, 1, 4] with "
        "rotary dim 4");
}

TEST_CASE("RMSNormalization: last axis, all axes with epsilon, stash_type") {
  // Row [3, 4]: rms = sqrt(12.5); row [1, 1]: rms = 1.
  auto x = Floats({2, 2}, {3, 4, 1, 1});
  auto scale = Floats({2}, {1, 2});
  AttrMap a;
  a.SetFloat("epsilon", 0.0f);
  auto y = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("RMSNormalization", a, {&x, &scale}, {&y}).ok());
  const float r = std::sqrt(12.5f);
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{3 / r, 8 / r, 1, 2}));
  // axis 0: mean square (9 + 16 + 1 + 1) / 4 = 6.75, + epsilon 0.25 = 7; a [1] scale of 2.
  AttrMap all;
  all.SetInt("axis", 0);
  all.SetFloat("epsilon", 0.25f);
  auto two = Floats({1}, {2});
  REQUIRE(RunKernel("RMSNormalization", all, {&x, &two}, {&y}).ok());
  const float s7 = std::sqrt(7.0f);
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{6 / s7, 8 / s7, 2 / s7, 2 / s7}));
  AttrMap stash;
  stash.SetInt("stash_type", 16);
  Status s = RunKernel("RMSNormalization", stash, {&x, &scale}, {&y});
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message() == "RMSNormalization: stash_type 16: only 1 (float32) is supported");
  auto bad = Floats({3}, {1, 2, 3});
  CHECK(RunKernel("RMSNormalization", {}, {&x, &bad}, {&y}).message() ==
        "RMSNormalization: scale [3] must broadcast to the normalised shape [2]");
}

// ---- LinearAttention -------------------------------------------------------------------

// LinearAttention's attributes: the update rule, the head counts and an explicit scale (0: the
// default 1/sqrt(dk)).
AttrMap LinearAttentionAttrs(const char* rule, int64_t q_heads, int64_t kv_heads, float scale) {
  AttrMap a;
  a.SetString("update_rule", rule);
  a.SetInt("q_num_heads", q_heads);
  a.SetInt("kv_num_heads", kv_heads);
  if (scale != 0) a.SetFloat("scale", scale);
  return a;
}

// One head, dk = dv = 2, two tokens: q = [1, 0] then [0, 1], k = [1, 2] then [0, 1], v = [3, 4]
// then [5, 6]. The 'linear' rule from zeros: S1 = k1 (x) v1 = [[3, 4], [6, 8]], output 1 = q1^T S1
// = [3, 4] (S1's row 0); S2 = S1 + k2 (x) v2 = [[3, 4], [11, 14]], output 2 = its row 1 = [11, 14].
struct LinearTwoTokens {
  TestTensor q = Floats({1, 2, 2}, {1, 0, 0, 1});
  TestTensor k = Floats({1, 2, 2}, {1, 2, 0, 1});
  TestTensor v = Floats({1, 2, 2}, {3, 4, 5, 6});
  TestTensor identity = Floats({1, 1, 2, 2}, {1, 0, 0, 1});  // a past_state
  TestTensor y = Output(DType::kFloat32, {1, 2, 2});
  TestTensor state = Output(DType::kFloat32, {1, 1, 2, 2});
};

TEST_CASE("LinearAttention: 'linear' rule by hand, default scale, past_state given or absent") {
  LinearTwoTokens c;
  auto none = Absent();
  REQUIRE(RunKernel("LinearAttention", LinearAttentionAttrs("linear", 1, 1, 1), {&c.q, &c.k, &c.v}, {&c.y, &c.state})
              .ok());
  KILN_CHECK_FLOATS(c.y.values<float>(), (std::vector<float>{3, 4, 11, 14}));
  KILN_CHECK_FLOATS(c.state.values<float>(), (std::vector<float>{3, 4, 11, 14}));
  // The default scale 1/sqrt(dk) = 1/sqrt(2); the state is unscaled.
  REQUIRE(RunKernel("LinearAttention", LinearAttentionAttrs("linear", 1, 1, 0), {&c.q, &c.k, &c.v}, {&c.y, &c.state})
              .ok());
  const float r = 1 / std::sqrt(2.0f);
  KILN_CHECK_FLOATS(c.y.values<float>(), (std::vector<float>{3 * r, 4 * r, 11 * r, 14 * r}));
  KILN_CHECK_FLOATS(c.state.values<float>(), (std::vector<float>{3, 4, 11, 14}));
  // From past_state I: S1 = [[4, 4], [6, 9]], S2 = [[4, 4], [11, 15]].
  REQUIRE(RunKernel("LinearAttention", LinearAttentionAttrs("linear", 1, 1, 1), {&c.q, &c.k, &c.v, &c.identity},
                    {&c.y, &c.state})
              .ok());
  KILN_CHECK_FLOATS(c.y.values<float>(), (std::vector<float>{4, 4, 11, 15}));
  KILN_CHECK_FLOATS(c.state.values<float>(), (std::vector<float>{4, 4, 11, 15}));
  // present_state not read by the model: the state lives in the workspace, the output is the same.
  auto y = Output(DType::kFloat32, {1, 2, 2});
  REQUIRE(RunKernel("LinearAttention", LinearAttentionAttrs("linear", 1, 1, 1), {&c.q, &c.k, &c.v, &c.identity, &none},
                    {&y})
              .ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{4, 4, 11, 15}));
}

TEST_CASE("LinearAttention: 'gated' rule, a decay per head and per key dim") {
  LinearTwoTokens c;
  const float half = std::log(0.5f);
  // Per head, S halves before each write: S1 = 0.5 I + [[3, 4], [6, 8]] = [[3.5, 4], [6, 8.5]];
  // S2 = 0.5 S1 + [[0, 0], [5, 6]] = [[1.75, 2], [8, 10.25]].
  auto per_head = Floats({1, 2, 1}, {half, half});
  const AttrMap gated = LinearAttentionAttrs("gated", 1, 1, 1);
  auto none = Absent();
  REQUIRE(RunKernel("LinearAttention", gated, {&c.q, &c.k, &c.v, &c.identity, &per_head}, {&c.y, &c.state}).ok());
  KILN_CHECK_FLOATS(c.y.values<float>(), (std::vector<float>{3.5f, 4, 8, 10.25f}));
  KILN_CHECK_FLOATS(c.state.values<float>(), (std::vector<float>{1.75f, 2, 8, 10.25f}));
  // Per key dim, row d of S scales by exp(decay[d]): token 1 halves row 0, token 2 row 1.
  // S1 = [[0.5 + 3, 4], [6, 1 + 8]]; S2 = [[3.5, 4], [3 + 5, 4.5 + 6]].
  auto per_dim = Floats({1, 2, 2}, {half, 0, 0, half});
  REQUIRE(RunKernel("LinearAttention", gated, {&c.q, &c.k, &c.v, &c.identity, &per_dim}, {&c.y, &c.state}).ok());
  KILN_CHECK_FLOATS(c.y.values<float>(), (std::vector<float>{3.5f, 4, 8, 10.5f}));
  KILN_CHECK_FLOATS(c.state.values<float>(), (std::vector<float>{3.5f, 4, 8, 10.5f}));
  // Without the decay the gated rule has no gate to apply.
  Status st = RunKernel("LinearAttention", gated, {&c.q, &c.k, &c.v, &c.identity, &none}, {&c.y, &c.state});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("LinearAttention: update_rule 'gated', heads [q_num_heads, kv_num_heads] [1, 1] and "
                          "operands [1, 2, 2], [1, 2, 2], [1, 2, 2], [1, 1, 2, 2], <absent>, <absent>, [1, 2, 2], "
                          "[1, 1, 2, 2] of float32: expected ") == 0);
}

TEST_CASE("LinearAttention: 'delta' and 'gated_delta' rules with beta") {
  // k = [1, 0] then [1, 1], v = [2, 3] then [4, 5], beta = 0.5 then 1, from zeros.
  // Token 1: S0^T k = 0, v' = 0.5 * [2, 3] = [1, 1.5], S1 = [[1, 1.5], [0, 0]]; q = [1, 1] reads [1, 1.5].
  // Token 2: S1^T k = [1, 1.5], v' = [4 - 1, 5 - 1.5] = [3, 3.5], S2 = [[4, 5], [3, 3.5]]; q = [0, 1]
  // reads [3, 3.5].
  auto q = Floats({1, 2, 2}, {1, 1, 0, 1});
  auto k = Floats({1, 2, 2}, {1, 0, 1, 1});
  auto v = Floats({1, 2, 2}, {2, 3, 4, 5});
  auto beta = Floats({1, 2, 1}, {0.5f, 1});
  auto none = Absent();
  auto y = Output(DType::kFloat32, {1, 2, 2});
  auto state = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("LinearAttention", LinearAttentionAttrs("delta", 1, 1, 1), {&q, &k, &v, &none, &none, &beta},
                    {&y, &state})
              .ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1, 1.5f, 3, 3.5f}));
  KILN_CHECK_FLOATS(state.values<float>(), (std::vector<float>{4, 5, 3, 3.5f}));
  // gated_delta with a decay of ln 0.5 at token 2 only: S1 as above, then 0.5 S1 = [[0.5, 0.75], [0, 0]],
  // whose S^T k is [0.5, 0.75]: v' = [3.5, 4.25], S2 = [[4, 5], [3.5, 4.25]], read [3.5, 4.25].
  auto decay = Floats({1, 2, 1}, {0, std::log(0.5f)});
  REQUIRE(RunKernel("LinearAttention", LinearAttentionAttrs("gated_delta", 1, 1, 1), {&q, &k, &v, &none, &decay, &beta},
                    {&y, &state})
              .ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1, 1.5f, 3.5f, 4.25f}));
  KILN_CHECK_FLOATS(state.values<float>(), (std::vector<float>{4, 5, 3.5f, 4.25f}));
}

TEST_CASE("LinearAttention: grouped-query heads read the state of their kv head") {
  // q_num_heads 2, kv_num_heads 1, one token: S = [1, 2] (x) [3, 4] = [[3, 4], [6, 8]]; q head 0
  // = [1, 0] reads row 0, q head 1 = [0, 1] row 1.
  auto q = Floats({1, 1, 4}, {1, 0, 0, 1});
  auto k = Floats({1, 1, 2}, {1, 2});
  auto v = Floats({1, 1, 2}, {3, 4});
  auto y = Output(DType::kFloat32, {1, 1, 4});
  auto state = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("LinearAttention", LinearAttentionAttrs("linear", 2, 1, 1), {&q, &k, &v}, {&y, &state}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{3, 4, 6, 8}));
  KILN_CHECK_FLOATS(state.values<float>(), (std::vector<float>{3, 4, 6, 8}));
  // 4 q heads on 2 kv heads, dk = dv = 1: kv head 0's state is 1 * 3, kv head 1's 2 * 5. Query heads 0
  // and 1 share kv head 0, 2 and 3 kv head 1 (consecutive, not interleaved): [1 * 3, 2 * 3, 3 * 10, 4 * 10].
  auto q4 = Floats({1, 1, 4}, {1, 2, 3, 4});
  auto k2 = Floats({1, 1, 2}, {1, 2});
  auto v2 = Floats({1, 1, 2}, {3, 5});
  auto state2 = Output(DType::kFloat32, {1, 2, 1, 1});
  REQUIRE(RunKernel("LinearAttention", LinearAttentionAttrs("linear", 4, 2, 1), {&q4, &k2, &v2}, {&y, &state2}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{3, 6, 30, 40}));
  KILN_CHECK_FLOATS(state2.values<float>(), (std::vector<float>{3, 10}));
}

TEST_CASE("LinearAttention: bad attributes and shapes are errors") {
  // One message for every check: the attributes and operands found, then what they must be.
  const std::string expected =
      ": expected update_rule 'linear', 'gated', 'delta' or 'gated_delta', Hkv >= 1 dividing Hq, and float32 query "
      "[B, T, Hq*dk], key [B, T, Hkv*dk], value [B, T, Hkv*dv], past_state [B, Hkv, dk, dv], decay [B, T, Hkv*dk or "
      "Hkv] for the gated rules only, beta [B, T, Hkv or 1] for the delta rules only, output [B, T, Hq*dv], "
      "present_state as past_state";
  LinearTwoTokens c;
  Status st = RunKernel("LinearAttention", LinearAttentionAttrs("fast", 1, 1, 1), {&c.q, &c.k, &c.v}, {&c.y, &c.state});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "LinearAttention: update_rule 'fast', heads [q_num_heads, kv_num_heads] [1, 1] and operands "
                        "[1, 2, 2], [1, 2, 2], [1, 2, 2], <absent>, <absent>, <absent>, [1, 2, 2], [1, 1, 2, 2] of "
                        "float32" + expected);
  auto past = Floats({1, 1, 2, 1}, {0, 0});
  st = RunKernel("LinearAttention", LinearAttentionAttrs("linear", 1, 1, 1), {&c.q, &c.k, &c.v, &past},
                 {&c.y, &c.state});
  CHECK(st.message() == "LinearAttention: update_rule 'linear', heads [q_num_heads, kv_num_heads] [1, 1] and "
                        "operands [1, 2, 2], [1, 2, 2], [1, 2, 2], [1, 1, 2, 1], <absent>, <absent>, [1, 2, 2], "
                        "[1, 1, 2, 2] of float32" + expected);
  // 2 query heads on 3 kv heads.
  st = RunKernel("LinearAttention", LinearAttentionAttrs("linear", 2, 3, 1), {&c.q, &c.k, &c.v}, {&c.y, &c.state});
  CHECK(st.message().find("heads [q_num_heads, kv_num_heads] [2, 3] and") != std::string::npos);
}

}  // namespace
}  // namespace kiln::cpu::testing
