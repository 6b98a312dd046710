// The Attention kernel's two tile products (runtime/kernels/transformer.cc) as AVX-512
// register-blocked loops, for the CPUs that have it: the score tile S = scale Q K^T, with K
// transposed once per call, and the output rows O (+)= P V, with V read where it is. At the
// sizes attention has (a few dozen to 128 query rows, 64 or 32 head dims) dnnl_sgemm packs both
// operands on every call and costs microseconds per call; these read Q, P and V in place and
// keep every accumulator in a register (6 rows by 64 keys; 6 to 12 rows by the value head).
//
// Each result is a sum over d (or j) in order with one fused multiply-add per term, so it does
// not depend on the thread count or on where a tile starts.
#pragma once

#include <cstdint>

namespace kiln::cpu {

struct AttentionTiles {
  // s[r * lds + j] = scale * sum_e q[r * ldq + e] * K[j][e] (+ bias[r * ldb + j] when bias is
  // not null: the additive mask, ldb 0 for one row broadcast over the queries), for r < rows,
  // j < cols, e < d; kt holds K transposed in panels of kKeyPanel keys: panel p, keys
  // [p * 64, p * 64 + 64), is [d, 64] floats at kt + p * d * 64, zero past the last key. When
  // row_max is not null, row_max[r] = the largest s[r * lds + j] over j < cols, NaNs aside (-inf
  // when there is none), computed from the registers as the tile is stored (the softmax's first
  // pass, without reading the tile back). All pointers are float32; no alignment is required.
  void (*scores)(const float* q, int64_t ldq, const float* kt, int64_t rows, int64_t cols, int64_t d, float scale,
                 const float* bias, int64_t ldb, float* s, int64_t lds, float* row_max);
  // o[r * ldo + e] = (accumulate ? o[r * ldo + e] : 0) + sum_j p[r * ldp + j] * v[j * ldv + e],
  // for r < rows, e < dv; dv at most kMaxValueDim.
  void (*values)(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t rows, int64_t cols, int64_t dv,
                 bool accumulate, float* o, int64_t ldo);
};

// Keys per panel of `scores`' transposed K.
inline constexpr int64_t kKeyPanel = 64;

// The largest value head size `values` takes (four 16-float vectors per row: BERT's, ViT's,
// Whisper's and GPT-2's 64, Swin's 32); larger heads run on dnnl_sgemm, so that the runtime
// carries three builds of it rather than eight.
inline constexpr int64_t kMaxValueDim = 64;

// The AVX-512 build when ActiveCpuIsa() is AVX-512, else null (the kernel then runs its products
// on dnnl_sgemm). Null in a selective runtime (runtime/kernels/selective.h), built for size.
const AttentionTiles* ActiveAttentionTiles();

}  // namespace kiln::cpu
