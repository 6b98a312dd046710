// Transposes of byte matrices: the NCHW <-> NHWC reorders of int8 and uint8 tensors around
// oneDNN's int8 convolutions (runtime/cpu/onednn/onednn.h), which oneDNN 2.6's own reorder ran
// at under 1 GB/s here (a 1x1024x14x14 uint8 tensor: 0.23 ms).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// dst[b][j][i] = src[b][i][j] for `batch` matrices of `rows` x `cols` bytes, each row-major and
// packed: NCHW -> NHWC is rows = C, cols = H * W per image; NHWC -> NCHW is rows = H * W, cols
// = C. src and dst must not overlap. Thread-safe (it writes only dst).
void TransposeBytes(const uint8_t* src, uint8_t* dst, int64_t batch, int64_t rows, int64_t cols);
// Rows [row_begin, row_end) of one `rows` x `cols` matrix into their columns of dst: a part of
// TransposeBytes, for splitting one over threads (parts that start on a multiple of 16 keep the
// 16 x 16 blocks).
void TransposeByteRows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, int64_t row_begin,
                       int64_t row_end);

}  // namespace kiln::cpu
