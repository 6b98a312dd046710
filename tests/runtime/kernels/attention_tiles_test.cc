// runtime/kernels/attention_tiles.h's AVX-512 tile products against double-precision loops, at
// sizes that cross every register block, panel and vector edge (rows not a multiple of 6 or 12,
// keys not a multiple of 16 or 64, head sizes 1 to 128 and value heads 1 to 64), with strided operands. Skipped on a CPU
// without AVX-512 (ActiveAttentionTiles() is null there; the kernel then uses dnnl_sgemm).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/kernels/attention_tiles.h"

namespace kiln::cpu {
namespace {

// Deterministic values in [-1, 1).
float TileValue(int64_t i) { return static_cast<float>((i * 7919 + 13) % 2000) / 1000.0f - 1.0f; }

// K [cols, d] (row stride ldk) as `scores` takes it: panels of kKeyPanel keys, [d, 64] each.
std::vector<float> PackKeys(const std::vector<float>& k, int64_t ldk, int64_t cols, int64_t d) {
  const int64_t panels = (cols + kKeyPanel - 1) / kKeyPanel;
  std::vector<float> kt(static_cast<size_t>(panels * d * kKeyPanel), 0.0f);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t e = 0; e < d; ++e) kt[(j / kKeyPanel) * d * kKeyPanel + e * kKeyPanel + j % kKeyPanel] = k[j * ldk + e];
  return kt;
}

// scores with a bias (ldb 0: one row broadcast over the queries, and per row; -inf entries, a
// NaN, a row all -inf) and the row maxima, against the plain scores `plain` plus the bias and
// their largest entry, NaNs aside.
void CheckBiasAndMax(const AttentionTiles& tiles, const std::vector<float>& q, int64_t ldq, const std::vector<float>& kt,
                     int64_t rows, int64_t cols, int64_t d, const std::vector<float>& plain) {
  const int64_t lds = cols + 2;
  for (const bool per_row : {false, true}) {
    const int64_t ldb = per_row ? cols + 1 : 0;
    std::vector<float> bias(static_cast<size_t>((per_row ? rows : 1) * (cols + 1)));
    for (size_t i = 0; i < bias.size(); ++i)
      bias[i] = i % 5 == 3 ? -std::numeric_limits<float>::infinity() : TileValue(static_cast<int64_t>(i) + 77);
    if (per_row) {
      bias[static_cast<size_t>(cols / 2)] = std::numeric_limits<float>::quiet_NaN();  // row 0
      if (rows > 1)
        for (int64_t j = 0; j < cols; ++j) bias[static_cast<size_t>(ldb + j)] = -std::numeric_limits<float>::infinity();
    }
    std::vector<float> s(static_cast<size_t>(rows * lds), -7.0f), row_max(static_cast<size_t>(rows), 5.0f);
    tiles.scores(q.data(), ldq, kt.data(), rows, cols, d, 0.125f, bias.data(), ldb, s.data(), lds, row_max.data());
    for (int64_t r = 0; r < rows; ++r) {
      float want_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < cols; ++j) {
        const float want = plain[static_cast<size_t>(r * lds + j)] + bias[static_cast<size_t>(r * ldb + j)];
        const float got = s[static_cast<size_t>(r * lds + j)];
        if (std::isnan(want)) {
          REQUIRE(std::isnan(got));
          continue;
        }
        REQUIRE(got == want);  // the same product, then one add
        want_max = std::max(want_max, want);
      }
      REQUIRE(row_max[static_cast<size_t>(r)] == want_max);
      for (int64_t j = cols; j < lds; ++j) REQUIRE(s[static_cast<size_t>(r * lds + j)] == -7.0f);
    }
  }
}

TEST_CASE("attention tiles: scores and values match double-precision loops at every edge") {
  const AttentionTiles* tiles = ActiveAttentionTiles();
  if (tiles == nullptr) {
    MESSAGE("the active instruction set (ActiveCpuIsa) is not AVX-512: the Attention kernel's products run on dnnl_sgemm");
    return;
  }
  for (const int64_t rows : {1, 5, 6, 7, 13, 25, 131}) {
    for (const int64_t cols : {1, 15, 17, 49, 64, 65, 130}) {
      for (const int64_t d : {1, 20, 32, 64, 80, 128}) {
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(d);
        const int64_t ldq = d + 3, ldk = d + 5, lds = cols + 2;
        std::vector<float> q(static_cast<size_t>(rows * ldq)), k(static_cast<size_t>(cols * ldk));
        for (size_t i = 0; i < q.size(); ++i) q[i] = TileValue(static_cast<int64_t>(i));
        for (size_t i = 0; i < k.size(); ++i) k[i] = TileValue(static_cast<int64_t>(i) + 500);
        const std::vector<float> kt = PackKeys(k, ldk, cols, d);
        std::vector<float> s(static_cast<size_t>(rows * lds), -7.0f);
        tiles->scores(q.data(), ldq, kt.data(), rows, cols, d, 0.125f, nullptr, 0, s.data(), lds, nullptr);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < cols; ++j) {
            double want = 0;
            for (int64_t e = 0; e < d; ++e) want += double{q[r * ldq + e]} * k[j * ldk + e];
            REQUIRE(s[r * lds + j] == doctest::Approx(0.125 * want).epsilon(1e-5).scale(1.0));
          }
          for (int64_t j = cols; j < lds; ++j) REQUIRE(s[r * lds + j] == -7.0f);  // nothing past the tile
        }
        CheckBiasAndMax(*tiles, q, ldq, kt, rows, cols, d, s);

        // values: o = P V with P the scores above (as probabilities would be), then accumulated
        const int64_t dv = std::min(d, kMaxValueDim), ldv = dv + 1, ldo = dv + 4;
        std::vector<float> v(static_cast<size_t>(cols * ldv)), o(static_cast<size_t>(rows * ldo), -3.0f);
        for (size_t i = 0; i < v.size(); ++i) v[i] = TileValue(static_cast<int64_t>(i) + 900);
        tiles->values(s.data(), lds, v.data(), ldv, rows, cols, dv, false, o.data(), ldo);
        std::vector<float> first = o;
        tiles->values(s.data(), lds, v.data(), ldv, rows, cols, dv, true, o.data(), ldo);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t e = 0; e < dv; ++e) {
            double want = 0;
            for (int64_t j = 0; j < cols; ++j) want += double{s[r * lds + j]} * v[j * ldv + e];
            REQUIRE(first[r * ldo + e] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
            REQUIRE(o[r * ldo + e] == doctest::Approx(2 * want).epsilon(1e-5).scale(2.0));
          }
          for (int64_t e = dv; e < ldo; ++e) REQUIRE(o[r * ldo + e] == -3.0f);  // nothing past the row
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
