// GRU and RNN kernels on one- and two-step cases small enough to compute by hand, and the
// vectorized gate activations of GRU and LSTM against their element-by-element path.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

void CheckRnnClose(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  }
}

// Direction 0 of the GRU cases: x = 1, h0 = 0.5, W = [0.5, -1, 2] (z, r, h), R = [1, 2, -0.5],
// B = [Wbz, Wbr, Wbh, Rbz, Rbr, Rbh] = [0.1, 0.2, 0.3, -0.1, 0.4, 0.5]:
//   z = σ(0.5 + 0.5 + 0.1 - 0.1) = σ(1) = 0.731058579
//   r = σ(-1 + 1 + 0.2 + 0.4) = σ(0.6) = 0.645656306
//   linear_before_reset 0: n = tanh(2 + (r·0.5)·(-0.5) + 0.3 + 0.5) = tanh(2.8 - 0.25 r)
//   linear_before_reset 1: n = tanh(2 + 0.3 + r·(0.5·(-0.5) + 0.5)) = tanh(2.3 + 0.25 r)
//   h = (1 - z) n + 0.5 z = 0.631737779 (0), 0.630584011 (1)
TEST_CASE("GRU one step, linear_before_reset 0 and 1") {
  auto x = Floats({1, 1, 1}, {1});
  auto w = Floats({1, 3, 1}, {0.5f, -1, 2});
  auto r = Floats({1, 3, 1}, {1, 2, -0.5f});
  auto b = Floats({1, 6}, {0.1f, 0.2f, 0.3f, -0.1f, 0.4f, 0.5f});
  auto lens = Absent();
  auto h0 = Floats({1, 1, 1}, {0.5f});
  for (int64_t lbr : {0, 1}) {
    CAPTURE(lbr);
    auto y = Output(DType::kFloat32, {1, 1, 1, 1});
    auto yh = Output(DType::kFloat32, {1, 1, 1});
    AttrMap attrs;
    attrs.SetInt("hidden_size", 1);
    attrs.SetInt("linear_before_reset", lbr);
    Status s = RunKernel("GRU", attrs, {&x, &w, &r, &b, &lens, &h0}, {&y, &yh});
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    const float want = lbr ? 0.630584011f : 0.631737779f;
    CheckRnnClose(y.values<float>(), {want});
    CheckRnnClose(yh.values<float>(), {want});
  }
}

// Direction 1 runs W = [1, 1, 1], R = 0, no bias, h0 = 0 with f = HardSigmoid(0.5, 0.25) and
// g = Affine(2, 1): z = r = clamp(0.5 + 0.25) = 0.75, n = 2·1 + 1 = 3, h = 0.25·3 = 0.75.
// Sigmoid and Tanh take no alpha, so HardSigmoid gets the first alpha and beta.
TEST_CASE("GRU bidirectional, layout 1, per-direction activations") {
  auto x = Floats({1, 1, 1}, {1});
  auto w = Floats({2, 3, 1}, {0.5f, -1, 2, 1, 1, 1});
  auto r = Floats({2, 3, 1}, {1, 2, -0.5f, 0, 0, 0});
  auto b = Floats({2, 6}, {0.1f, 0.2f, 0.3f, -0.1f, 0.4f, 0.5f, 0, 0, 0, 0, 0, 0});
  auto lens = Absent();
  auto h0 = Floats({1, 2, 1}, {0.5f, 0});
  auto y = Output(DType::kFloat32, {1, 1, 2, 1});
  auto yh = Output(DType::kFloat32, {1, 2, 1});
  AttrMap attrs;
  attrs.SetInt("hidden_size", 1);
  attrs.SetInt("layout", 1);
  attrs.SetString("direction", "bidirectional");
  attrs.SetString("activations", "Sigmoid,Tanh,HardSigmoid,affine");
  attrs.SetFloats("activation_alpha", {0.5f, 2});
  attrs.SetFloats("activation_beta", {0.25f, 1});
  Status s = RunKernel("GRU", attrs, {&x, &w, &r, &b, &lens, &h0}, {&y, &yh});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckRnnClose(y.values<float>(), {0.631737779f, 0.75f});
  CheckRnnClose(yh.values<float>(), {0.631737779f, 0.75f});
}

// H = 2, W = [1, -1], R = 0.5·I, no bias, x[t] = [[1, 2], [3, 4]] (t, b), reverse,
// sequence_lens [2, 1], clip 2.75, LeakyRelu(0.1):
//   b0, t=1: pre [3, -3] -> clip [2.75, -2.75] -> [2.75, -0.275]
//   b0, t=0: pre [1 + 1.375, -1 - 0.1375] -> [2.375, -0.11375]
//   b1, t=0: pre [2, -2] -> [2, -0.2]; t=1 is past its length, so Y there stays 0.
TEST_CASE("RNN reverse with sequence_lens, clip and LeakyRelu") {
  auto x = Floats({2, 2, 1}, {1, 2, 3, 4});
  auto w = Floats({1, 2, 1}, {1, -1});
  auto r = Floats({1, 2, 2}, {0.5f, 0, 0, 0.5f});
  auto b = Absent();
  auto lens = Int32s({2}, {2, 1});
  auto y = Output(DType::kFloat32, {2, 1, 2, 2});
  auto yh = Output(DType::kFloat32, {1, 2, 2});
  AttrMap attrs;
  attrs.SetInt("hidden_size", 2);
  attrs.SetString("direction", "reverse");
  attrs.SetFloat("clip", 2.75f);
  attrs.SetString("activations", "LeakyRelu");
  attrs.SetFloats("activation_alpha", {0.1f});
  Status s = RunKernel("RNN", attrs, {&x, &w, &r, &b, &lens}, {&y, &yh});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckRnnClose(y.values<float>(), {2.375f, -0.11375f, 2, -0.2f, 2.75f, -0.275f, 0, 0});
  CheckRnnClose(yh.values<float>(), {2.375f, -0.11375f, 2, -0.2f});
}

// RNN defaults: tanh, bias W's + R's: h = tanh(2·1 + 0.25 + 0.5 + 0.5·(-1)) = tanh(2.25).
TEST_CASE("RNN one step with bias and initial_h, Y absent") {
  auto x = Floats({1, 1, 1}, {1});
  auto w = Floats({1, 1, 1}, {2});
  auto r = Floats({1, 1, 1}, {0.5f});
  auto b = Floats({1, 2}, {0.25f, 0.5f});
  auto lens = Absent();
  auto h0 = Floats({1, 1, 1}, {-1});
  auto y = Absent();
  auto yh = Output(DType::kFloat32, {1, 1, 1});
  AttrMap attrs;
  Status s = RunKernel("RNN", attrs, {&x, &w, &r, &b, &lens, &h0}, {&y, &yh});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckRnnClose(yh.values<float>(), {0.978026115f});
}

TEST_CASE("GRU/RNN errors: shapes and activations") {
  auto x = Floats({1, 1, 2}, {1, 2});
  auto w = Floats({1, 3, 1}, {});
  auto r = Floats({1, 3, 1}, {});
  auto y = Output(DType::kFloat32, {1, 1, 1, 1});
  AttrMap attrs;
  attrs.SetInt("hidden_size", 1);
  CHECK(RunKernel("GRU", attrs, {&x, &w, &r}, {&y}).message() == "GRU: W is [1, 3, 1], expected [1, 3, 2]");
  auto w2 = Floats({1, 3, 2}, {});
  attrs.SetString("activations", "Sigmoid");
  CHECK(RunKernel("GRU", attrs, {&x, &w2, &r}, {&y}).message() == "GRU: activations: expected 2, found 1 in 'Sigmoid'");
  attrs.SetString("activations", "Sigmoid,Tanh,Tanh");
  CHECK(RunKernel("GRU", attrs, {&x, &w2, &r}, {&y}).message() ==
        "GRU: activations: expected 2, found more in 'Sigmoid,Tanh,Tanh'");
  attrs.SetString("activations", "Sigmoid,Gelu");
  Status s = RunKernel("GRU", attrs, {&x, &w2, &r}, {&y});
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message() == "GRU: activations: 'Gelu' is not supported");
  AttrMap rnn;
  rnn.SetString("direction", "sideways");
  auto w1 = Floats({1, 1, 2}, {});
  auto r1 = Floats({1, 1, 1}, {});
  CHECK(RunKernel("RNN", rnn, {&x, &w1, &r1}, {&y}).message() == "RNN: unknown direction 'sideways'");
}

}  // namespace
}  // namespace kiln::cpu::testing

namespace kiln::cpu::testing {
namespace {

// The default activations run vectorized (runtime/kernels/row_math.h); a clip too large to
// bind sends the same cell down the element-by-element path (recurrent.h's Activation). The
// two agree within the vector math's 1e-6 on a bidirectional case of 37 hidden units (crossing
// the vector width), batch 2 with sequence lengths 3 and 5.
void CheckVectorizedGates(const char* op, int64_t gates, int64_t lbr) {
  const int64_t S = 5, B = 2, I = 7, H = 37;
  auto values = [](int64_t n, float scale, uint32_t seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) seed = seed * 1664525u + 1013904223u, x = scale * (static_cast<float>(seed >> 8) / 8388608.0f - 1);
    return v;
  };
  auto x = Floats({S, B, I}, values(S * B * I, 2.0f, 1));
  auto w = Floats({2, gates * H, I}, values(2 * gates * H * I, 0.5f, 2));
  auto r = Floats({2, gates * H, H}, values(2 * gates * H * H, 0.3f, 3));
  auto b = Floats({2, 2 * gates * H}, values(4 * gates * H, 0.5f, 4));
  auto lens = Int32s({B}, {3, 5});
  auto h0 = Floats({2, B, H}, values(2 * B * H, 0.5f, 5));
  std::vector<std::vector<float>> results;
  for (const bool clip : {false, true}) {
    auto y = Output(DType::kFloat32, {S, 2, B, H});
    AttrMap attrs;
    attrs.SetInt("hidden_size", H);
    attrs.SetString("direction", "bidirectional");
    if (lbr) attrs.SetInt("linear_before_reset", 1);
    if (clip) attrs.SetFloat("clip", 1e30f);
    const Status s = RunKernel(op, attrs, {&x, &w, &r, &b, &lens, &h0}, {&y});
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    results.push_back(y.values<float>());
  }
  REQUIRE(results[0].size() == results[1].size());
  int bad = 0;
  for (size_t i = 0; i < results[0].size(); ++i) bad += !(std::fabs(results[0][i] - results[1][i]) <= 2e-6f);
  CHECK(bad == 0);
}

TEST_CASE("GRU and LSTM: the vectorized default activations equal the element-by-element path") {
  CheckVectorizedGates("GRU", 3, 0);
  CheckVectorizedGates("GRU", 3, 1);
  CheckVectorizedGates("LSTM", 4, 0);
}

}  // namespace
}  // namespace kiln::cpu::testing
