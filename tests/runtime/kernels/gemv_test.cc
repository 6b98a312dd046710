// runtime/kernels/gemv.h's AVX-512 product against a double-precision loop, at sizes that cross
// its four-row blocks and vector edges (rows not a multiple of 4, columns not a multiple of 16),
// with a row stride past the columns and y accumulated onto. Skipped on a CPU without AVX-512
// (ActiveGemv() is null there; LSTM and GRU then run their product on Sgemm).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/kernels/gemv.h"

namespace kiln::cpu {
namespace {

float GemvValue(int64_t i) { return static_cast<float>((i * 7919 + 13) % 2000) / 1000.0f - 1.0f; }

TEST_CASE("gemv: y += A x matches a double-precision loop at every edge") {
  const GemvFn gemv = ActiveGemv();
  if (gemv == nullptr) {
    MESSAGE("the active instruction set (ActiveCpuIsa) is not AVX-512: LSTM and GRU run their product on Sgemm");
    return;
  }
  for (const int64_t rows : {1, 3, 4, 5, 9, 1024}) {
    for (const int64_t cols : {1, 15, 16, 17, 33, 256}) {
      CAPTURE(rows);
      CAPTURE(cols);
      const int64_t lda = cols + 3;
      std::vector<float> a(static_cast<size_t>(rows * lda)), x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
      for (size_t i = 0; i < a.size(); ++i) a[i] = GemvValue(static_cast<int64_t>(i));
      for (size_t i = 0; i < x.size(); ++i) x[i] = GemvValue(static_cast<int64_t>(i) + 5);
      for (size_t i = 0; i < y.size(); ++i) y[i] = 0.25f * static_cast<float>(i % 3);
      std::vector<float> want(y.size());
      for (int64_t j = 0; j < rows; ++j) {
        double acc = y[static_cast<size_t>(j)];
        for (int64_t e = 0; e < cols; ++e) acc += double{a[static_cast<size_t>(j * lda + e)]} * x[static_cast<size_t>(e)];
        want[static_cast<size_t>(j)] = static_cast<float>(acc);
      }
      gemv(a.data(), lda, x.data(), rows, cols, y.data());
      int bad = 0;
      for (size_t j = 0; j < y.size(); ++j)
        bad += !(std::fabs(y[j] - want[j]) <= 1e-5f * (1.0f + static_cast<float>(cols) / 16.0f));
      CHECK(bad == 0);
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
