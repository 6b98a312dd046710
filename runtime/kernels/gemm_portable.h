// Kiln's own GEMM in portable C++: the CPU backend's GEMM when the runtime is built without
// BLAS (CMake -DKILN_WITH_BLAS=OFF, runtime/kernels/gemm_no_blas.cc), for GPU-only edge images
// and cross builds (scripts/aarch64.sh) that should not carry OpenBLAS. The normal build
// compiles it into the tests only, which check it against OpenBLAS
// (tests/runtime/kernels/gemm_test.cc).
//
// What changes without BLAS:
// - Speed. This is a cache-blocked GEMM (blocks of 64 rows of A by 256 of K; each 4 x 8
//   tile of C, 4 x 4 for float64, accumulated in registers over a packed strip of B; a
//   product of 1-3 rows with B transposed, such as an LSTM step, as dot products), written
//   with 16-byte vectors (GCC/Clang vector extensions: SSE2 on x86-64, NEON on aarch64);
//   OpenBLAS picks hand-written kernels for the CPU at run time (AVX2/AVX-512 with FMA).
//   On x86-64 with AVX-512, large float32 products take about 8x as long as OpenBLAS's
//   (256 x 784 x 576: 18 ms against 2.3 ms), so GEMM-heavy models (MatMul, Gemm, Conv,
//   ConvTranspose, recurrent and attention layers) run up to a few times slower on the CPU
//   backend (the runtime alone, one thread, medians of 20 runs on a busy 2-core
//   host: Silero VAD 0.19 ms against 0.07 ms, PaddleOCR cls 7.4 ms against 2.6 ms, PP-OCRv4
//   det 62 ms against 40 ms). The CUDA backend is unaffected.
// - Bits. Sums are taken in another order than OpenBLAS's (K in blocks of 256; dot products
//   over vector lanes), so float outputs differ from a BLAS build's by rounding (within the
//   tolerances the tests use against onnxruntime). They are still the same bits at every
//   thread count: the split over threads (runtime/kernels/gemm.cc) depends on the shape only.
// - Nothing else: same kernels, same API, no allocation (the packed strip is on the stack,
//   8 KiB for both float32 and float64), no threads of its own, thread-safe.
#pragma once

#include <cstdint>

namespace kiln::cpu::portable {

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, row-major, op = transpose when
// ta / tb, leading dimensions lda / ldb / ldc in elements; m, n >= 0, k >= 0 (k == 0 gives
// beta * C). C is not read when beta == 0, as in BLAS. The same contract as cblas_sgemm and
// cblas_dgemm with CblasRowMajor.
void Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void Dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
           const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace kiln::cpu::portable
