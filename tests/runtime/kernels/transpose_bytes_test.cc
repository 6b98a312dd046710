// TransposeBytes (runtime/kernels/transpose_bytes.h): the 16 x 16 SSE2 blocks and the scalar
// edges against the definition dst[b][j][i] = src[b][i][j], on shapes that are and are not
// multiples of 16, one and two matrices.
#include "runtime/kernels/transpose_bytes.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

namespace kiln::cpu {
namespace {

TEST_CASE("TransposeBytes matches its definition on every block and edge") {
  for (const int64_t rows : {1, 3, 16, 17, 33, 64, 100})
    for (const int64_t cols : {1, 5, 16, 31, 48, 196})
      for (const int64_t batch : {1, 2}) {
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(batch);
        std::vector<uint8_t> src(static_cast<size_t>(batch * rows * cols)), dst(src.size(), 0);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
        TransposeBytes(src.data(), dst.data(), batch, rows, cols);
        int bad = 0;
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j)
              bad += dst[static_cast<size_t>(b * rows * cols + j * rows + i)] !=
                     src[static_cast<size_t>(b * rows * cols + i * cols + j)];
        CHECK(bad == 0);
      }
}

}  // namespace
}  // namespace kiln::cpu
