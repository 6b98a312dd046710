#include "runtime/kernels/transpose_bytes.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kiln::cpu {
namespace {

#if defined(__SSE2__)
// The 16 x 16 block at src (row stride ls) into dst (row stride ld), transposed: four rounds of
// unpacks, bytes, then 16-, 32- and 64-bit lanes, each interleaving pairs of rows.
void Block16(const uint8_t* src, int64_t ls, uint8_t* dst, int64_t ld) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ls));
  for (int i = 0; i < 8; ++i) {  // b[2i + h]: rows 2i, 2i + 1, columns 8h to 8h + 7
    b[2 * i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i)  // a[4i + 2h + q]: rows 4i to 4i + 3, columns 8h + 4q to 8h + 4q + 3
    for (int h = 0; h < 2; ++h) {
      a[4 * i + 2 * h] = _mm_unpacklo_epi16(b[4 * i + h], b[4 * i + 2 + h]);
      a[4 * i + 2 * h + 1] = _mm_unpackhi_epi16(b[4 * i + h], b[4 * i + 2 + h]);
    }
  for (int i = 0; i < 2; ++i)  // b[8i + 2k + r]: rows 8i to 8i + 7, columns 2(2k + r), 2(2k + r) + 1
    for (int k = 0; k < 4; ++k) {
      b[8 * i + 2 * k] = _mm_unpacklo_epi32(a[8 * i + k], a[8 * i + 4 + k]);
      b[8 * i + 2 * k + 1] = _mm_unpackhi_epi32(a[8 * i + k], a[8 * i + 4 + k]);
    }
  for (int c = 0; c < 8; ++c) {  // columns 2c and 2c + 1, all 16 rows
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * c) * ld), _mm_unpacklo_epi64(b[c], b[8 + c]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * c + 1) * ld), _mm_unpackhi_epi64(b[c], b[8 + c]));
  }
}
#endif

}  // namespace

void TransposeByteRows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, int64_t row_begin,
                       int64_t row_end) {
  int64_t i0 = row_begin;
#if defined(__SSE2__)
  for (; i0 + 16 <= row_end; i0 += 16) {
    int64_t j0 = 0;
    for (; j0 + 16 <= cols; j0 += 16) Block16(src + i0 * cols + j0, cols, dst + j0 * rows + i0, rows);
    for (int64_t i = i0; i < i0 + 16; ++i)
      for (int64_t j = j0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
  }
#endif
  for (int64_t i = i0; i < row_end; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}

void TransposeBytes(const uint8_t* src, uint8_t* dst, int64_t batch, int64_t rows, int64_t cols) {
  for (int64_t m = 0; m < batch; ++m) TransposeByteRows(src + m * rows * cols, dst + m * rows * cols, rows, cols, 0, rows);
}

}  // namespace kiln::cpu
