#include <doctest/doctest.h>

#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// Deterministic small weights; the same formula in numpy fed onnxruntime (LSTM-14),
// whose outputs are the expected values below.
std::vector<float> LstmPattern(int64_t n, int64_t mul, int64_t mod, int64_t off, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * mul) % mod - off) * scale;
  return v;
}

constexpr int64_t S = 3, B = 2, I = 2, H = 3;

std::vector<float> Slice(const std::vector<float>& v, size_t begin, size_t count) {
  return std::vector<float>(v.begin() + begin, v.begin() + begin + count);
}

void CheckLstmClose(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5).scale(1e-6));
  }
}

TEST_CASE("LSTM forward, no bias or initial state") {
  auto x = Floats({S, B, I}, LstmPattern(S * B * I, 5, 9, 4, 0.25f));
  auto w = Floats({1, 4 * H, I}, Slice(LstmPattern(2 * 4 * H * I, 7, 11, 5, 0.1f), 0, 4 * H * I));
  auto r = Floats({1, 4 * H, H}, Slice(LstmPattern(2 * 4 * H * H, 3, 13, 6, 0.05f), 0, 4 * H * H));
  auto y = Output(DType::kFloat32, {S, 1, B, H});
  auto yh = Output(DType::kFloat32, {1, B, H});
  auto yc = Output(DType::kFloat32, {1, B, H});
  AttrMap attrs;
  attrs.SetInt("hidden_size", H);
  Status s = RunKernel("LSTM", attrs, {&x, &w, &r}, {&y, &yh, &yc});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckLstmClose(y.values<float>(), {-0.02533043f, -0.1111727f, 0.1108601f, -0.05153406f, -0.09724043f, 0.08846991f,
                                 -0.08679228f, -0.1267439f, 0.1155537f, -0.1255269f, -0.1110969f, 0.08792169f,
                                 0.0404481f, -0.02848379f, -0.02772689f, -0.003583319f, -0.01938853f, -0.05450017f});
  CheckLstmClose(yh.values<float>(),
                 {0.0404481f, -0.02848379f, -0.02772689f, -0.003583319f, -0.01938853f, -0.05450017f});
  CheckLstmClose(yc.values<float>(),
                 {0.07947128f, -0.06690466f, -0.04431187f, -0.006677225f, -0.04638966f, -0.09280008f});
}

TEST_CASE("LSTM bidirectional with bias, sequence_lens, initial state and peepholes") {
  auto x = Floats({S, B, I}, LstmPattern(S * B * I, 5, 9, 4, 0.25f));
  auto w = Floats({2, 4 * H, I}, LstmPattern(2 * 4 * H * I, 7, 11, 5, 0.1f));
  auto r = Floats({2, 4 * H, H}, LstmPattern(2 * 4 * H * H, 3, 13, 6, 0.05f));
  auto b = Floats({2, 8 * H}, LstmPattern(2 * 8 * H, 5, 7, 3, 0.1f));
  auto lens = Int32s({B}, {3, 2});
  auto h0 = Floats({2, B, H}, LstmPattern(2 * B * H, 2, 5, 2, 0.3f));
  auto c0 = Floats({2, B, H}, LstmPattern(2 * B * H, 3, 7, 3, 0.2f));
  auto p = Floats({2, 3 * H}, LstmPattern(2 * 3 * H, 4, 9, 4, 0.1f));
  auto y = Output(DType::kFloat32, {S, 2, B, H});
  auto yh = Output(DType::kFloat32, {2, B, H});
  auto yc = Output(DType::kFloat32, {2, B, H});
  AttrMap attrs;
  attrs.SetInt("hidden_size", H);
  attrs.SetString("direction", "bidirectional");
  Status s = RunKernel("LSTM", attrs, {&x, &w, &r, &b, &lens, &h0, &c0, &p}, {&y, &yh, &yc});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckLstmClose(y.values<float>(),
             {-0.1923434f, -0.1635426f, 0.2681048f, -0.1637926f, -0.07757416f, -0.01378938f,
              -0.1741135f, 0.1764085f, 0.003295625f, -0.1494266f, 0.1533969f, 0.1361672f,
              -0.2287428f, -0.1712081f, 0.2073754f, -0.2435783f, -0.1200283f, 0.05590446f,
              -0.07034876f, 0.02933394f, -0.02667768f, 0.03268135f, 0.0324497f, 0.2102798f,
              -0.1177022f, -0.04729202f, 0.1425592f, 0, 0, 0,
              0.07190111f, -0.1490735f, -0.1912896f, 0, 0, 0});
  CheckLstmClose(yh.values<float>(), {-0.1177022f, -0.04729202f, 0.1425592f, -0.2435783f, -0.1200283f, 0.05590446f,
                                  -0.1741135f, 0.1764085f, 0.003295625f, -0.1494266f, 0.1533969f, 0.1361672f});
  CheckLstmClose(yc.values<float>(), {-0.2272512f, -0.09755422f, 0.2440311f, -0.5319393f, -0.1856178f, 0.161538f,
                                  -0.2665924f, 0.388887f, 0.007203277f, -0.2254149f, 0.3692809f, 0.3214759f});
}

TEST_CASE("LSTM reverse with clip and input_forget, Y_c absent") {
  auto x = Floats({S, B, I}, LstmPattern(S * B * I, 5, 9, 4, 0.25f));
  auto w = Floats({1, 4 * H, I}, Slice(LstmPattern(2 * 4 * H * I, 7, 11, 5, 0.1f), 4 * H * I, 4 * H * I));
  auto r = Floats({1, 4 * H, H}, Slice(LstmPattern(2 * 4 * H * H, 3, 13, 6, 0.05f), 4 * H * H, 4 * H * H));
  auto b = Floats({1, 8 * H}, Slice(LstmPattern(2 * 8 * H, 5, 7, 3, 0.1f), 8 * H, 8 * H));
  auto y = Output(DType::kFloat32, {S, 1, B, H});
  auto yh = Output(DType::kFloat32, {1, B, H});
  auto absent = Absent();
  AttrMap attrs;
  attrs.SetInt("hidden_size", H);
  attrs.SetString("direction", "reverse");
  attrs.SetFloat("clip", 0.5f);
  attrs.SetInt("input_forget", 1);
  Status s = RunKernel("LSTM", attrs, {&x, &w, &r, &b}, {&y, &yh, &absent});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CheckLstmClose(y.values<float>(), {-0.1807722f, 0.1532674f, 0.01121566f, -0.1629251f, 0.1342487f, 0.03736757f,
                                 -0.1054382f, 0.08674753f, -0.003030806f, -0.08619804f, 0.07622271f, 0.01546504f,
                                 0, 5.328164e-09f, -0.1241117f, 0.009257219f, -0.02502456f, -0.1304172f});
  CheckLstmClose(yh.values<float>(), {-0.1807722f, 0.1532674f, 0.01121566f, -0.1629251f, 0.1342487f, 0.03736757f});
}

TEST_CASE("LSTM shape errors") {
  auto x = Floats({S, B, I}, LstmPattern(S * B * I, 5, 9, 4, 0.25f));
  auto w = Floats({1, 4 * H, I + 1}, {});
  auto r = Floats({1, 4 * H, H}, {});
  auto y = Output(DType::kFloat32, {S, 1, B, H});
  AttrMap attrs;
  attrs.SetInt("hidden_size", H);
  Status s = RunKernel("LSTM", attrs, {&x, &w, &r}, {&y});
  CHECK(s.message() == "LSTM: W is [1, 12, 3], expected [1, 12, 2]");
  attrs.SetInt("layout", 2);
  CHECK(RunKernel("LSTM", attrs, {&x, &w, &r}, {&y}).message() == "LSTM: layout must be 0 or 1, got 2");
}

// Layout 1 (batch first) on the bidirectional case above: the same numbers, transposed.
TEST_CASE("LSTM layout 1: X [batch, seq, input], Y [batch, seq, dirs, H], states [batch, dirs, H]") {
  // Swaps the two leading dims of a [a, b, inner] row-major array.
  auto swap01 = [](const std::vector<float>& v, int64_t a, int64_t b, int64_t inner) {
    std::vector<float> out(v.size());
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t k = 0; k < inner; ++k) out[(j * a + i) * inner + k] = v[(i * b + j) * inner + k];
    return out;
  };
  auto x = Floats({B, S, I}, swap01(LstmPattern(S * B * I, 5, 9, 4, 0.25f), S, B, I));
  auto w = Floats({2, 4 * H, I}, LstmPattern(2 * 4 * H * I, 7, 11, 5, 0.1f));
  auto r = Floats({2, 4 * H, H}, LstmPattern(2 * 4 * H * H, 3, 13, 6, 0.05f));
  auto b = Floats({2, 8 * H}, LstmPattern(2 * 8 * H, 5, 7, 3, 0.1f));
  auto lens = Int32s({B}, {3, 2});
  auto h0 = Floats({B, 2, H}, swap01(LstmPattern(2 * B * H, 2, 5, 2, 0.3f), 2, B, H));
  auto c0 = Floats({B, 2, H}, swap01(LstmPattern(2 * B * H, 3, 7, 3, 0.2f), 2, B, H));
  auto p = Floats({2, 3 * H}, LstmPattern(2 * 3 * H, 4, 9, 4, 0.1f));
  auto y = Output(DType::kFloat32, {B, S, 2, H});
  auto yh = Output(DType::kFloat32, {B, 2, H});
  auto yc = Output(DType::kFloat32, {B, 2, H});
  AttrMap attrs;
  attrs.SetInt("hidden_size", H);
  attrs.SetInt("layout", 1);
  attrs.SetString("direction", "bidirectional");
  Status s = RunKernel("LSTM", attrs, {&x, &w, &r, &b, &lens, &h0, &c0, &p}, {&y, &yh, &yc});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  // Layout 0's Y [S, 2, B, H] is [S*2, B, H]; batch first is [B, S*2, H].
  CheckLstmClose(y.values<float>(),
             swap01({-0.1923434f, -0.1635426f, 0.2681048f, -0.1637926f, -0.07757416f, -0.01378938f,
                     -0.1741135f, 0.1764085f, 0.003295625f, -0.1494266f, 0.1533969f, 0.1361672f,
                     -0.2287428f, -0.1712081f, 0.2073754f, -0.2435783f, -0.1200283f, 0.05590446f,
                     -0.07034876f, 0.02933394f, -0.02667768f, 0.03268135f, 0.0324497f, 0.2102798f,
                     -0.1177022f, -0.04729202f, 0.1425592f, 0, 0, 0,
                     0.07190111f, -0.1490735f, -0.1912896f, 0, 0, 0},
                    S * 2, B, H));
  CheckLstmClose(yh.values<float>(),
             swap01({-0.1177022f, -0.04729202f, 0.1425592f, -0.2435783f, -0.1200283f, 0.05590446f,
                     -0.1741135f, 0.1764085f, 0.003295625f, -0.1494266f, 0.1533969f, 0.1361672f}, 2, B, H));
  CheckLstmClose(yc.values<float>(),
             swap01({-0.2272512f, -0.09755422f, 0.2440311f, -0.5319393f, -0.1856178f, 0.161538f,
                     -0.2665924f, 0.388887f, 0.007203277f, -0.2254149f, 0.3692809f, 0.3214759f}, 2, B, H));
}


// hidden_size = INT64_MAX overflowed 4 * hidden_size in the shape checks (h8 tester).
TEST_CASE("LSTM: a hidden_size that overflows the gate sizes is an error") {
  auto x = Floats({S, B, I}, LstmPattern(S * B * I, 5, 9, 4, 0.25f));
  auto w = Floats({1, 4 * H, I}, {});
  auto r = Floats({1, 4 * H, H}, {});
  auto y = Output(DType::kFloat32, {S, 1, B, H});
  AttrMap attrs;
  attrs.SetInt("hidden_size", std::numeric_limits<int64_t>::max());
  CHECK(RunKernel("LSTM", attrs, {&x, &w, &r}, {&y}).message() ==
        "LSTM: hidden_size 9223372036854775807 is outside [0, 2^63 / 8)");
}

}  // namespace
}  // namespace kiln::cpu::testing
