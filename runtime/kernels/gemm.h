// Single- and double-precision GEMM for the CPU backend, float32 split over the context's
// threads.
//
// One interface, two implementations chosen by CMake's KILN_WITH_BLAS (never both in one
// runtime): runtime/kernels/gemm_openblas.cc (ON, the default) calls OpenBLAS's cblas_sgemm /
// cblas_dgemm; runtime/kernels/gemm_portable.cc (OFF: GPU-only edge images, cross builds) is
// Kiln's own cache-blocked C++ GEMM (runtime/kernels/gemm_portable.h says what that changes).
// runtime/kernels/gemm.cc, the split over threads, is the same for both.
//
// The CPU backend keeps OpenBLAS at one thread (PrepareGemmThreads) and parallelises its
// GEMMs itself, so that one pool of threads serves every kernel. OpenBLAS's own idle
// workers wait by calling sched_yield for about 0.1 s after each GEMM, and with as many
// threads as cores they then take time from the pool's threads in the fused programs and
// convolutions that run between GEMMs. Measured at 2 threads on 2 idle cores (medians of
// 30 runs): PP-OCRv4 det 13.0 ms this way, 16.9 ms with OpenBLAS's threads; ResNet-50
// 53 ms this way, 63 ms with OpenBLAS's threads.
#pragma once

#include <cstdint>

#include "kiln/library.h"
#include "runtime/kernels/thread_pool.h"

namespace kiln::cpu {

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, row-major, op = transpose when
// ta / tb; m, n, k > 0. A large product is cut into blocks of C's columns (of its rows when
// C is taller than wide), one Sgemm call per block, the blocks spread over `threads`.
// The blocks depend on the shape only, never on the pool, so the calls and therefore the
// bits are the same at every thread count (OpenBLAS's summation order can depend on a
// call's size, so a split that followed the thread count would not be).
void ParallelSgemm(ThreadPool* threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Whether ParallelSgemm cuts C[m, n] (op(A) m x k) into more than one block (products of at
// least 2^22 multiply-adds with room for two blocks); a smaller one is one Sgemm call.
bool SgemmSplits(int64_t m, int64_t n, int64_t k);

// The columns per block ParallelSgemm cuts C[m, n] (op(A) m x k) into when it cuts C's
// columns; n when it makes one call or cuts rows. A caller that runs the blocks itself
// (each with Sgemm below, then its own per-block work) makes the same calls, so gets the
// same bits.
int64_t SgemmColumnBlock(int64_t m, int64_t n, int64_t k);

// The same product in one call on the calling thread: oneDNN's dnnl_sgemm in a runtime built
// with oneDNN for products of at least kOneDnnSgemmMinWork multiply-adds, else BlasSgemm. As
// in BLAS, C is not read when beta == 0 (NaNs there do not propagate). Allocates nothing.
// Why oneDNN first: Debian's OpenBLAS runs its Haswell (AVX2) kernels on AMD Zen 4/5 CPUs
// that have AVX-512, and dnnl_sgemm its AVX-512 ones. Measured on this project's 2-core AMD
// EPYC (1 thread, GFLOP/s, OpenBLAS against oneDNN): 64x1500x64 (attention's Q.K^T strip)
// 111 against 170; 128x768x768 124 against 249; 3136x96x96 121 against 259; 1x768x768 11
// against 47; 32x32x32 96 against 141. Below 16^3 oneDNN's call costs more (8x8x8: 0.06
// against 0.19 us), hence the threshold.
inline constexpr double kOneDnnSgemmMinWork = double{1 << 14};
void Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// What Sgemm runs an m x n x k product on: Library::kOneDnn (dnnl_sgemm), kOpenBlas, or
// kCpuKernel (the portable GEMM of a build without BLAS).
Library SgemmLibrary(int64_t m, int64_t n, int64_t k);
// The build's BLAS: kOpenBlas, or kCpuKernel for the portable GEMM.
Library BlasLibrary();

// The product on the build's BLAS: cblas_sgemm, or the portable GEMM. Same contract.
void BlasSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The float64 product, the same contract, on the calling thread (cblas_dgemm, or the
// portable GEMM).
void Dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
           const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// Called when a CPU ExecutionContext is created. OpenBLAS: sets its process-wide thread
// count to 1 (include/kiln/runtime.h tells users so), since Kiln splits GEMMs itself.
// Portable: nothing to do.
void PrepareGemmThreads();

// With oneDNN (OneDnnBuilt), the first call in the process runs two small products on zeros
// through Sgemm, one of each kind dnnl_sgemm sets up at its first call in the process (for every
// transposition at once): its matrix-vector kernels (about 2 ms on this project's 2-core AMD EPYC:
// Silero VAD's LSTM paid them in its first Run) and its GEMM kernels (about 30 ms: PP-OCRv4 det's
// ConvTranspose paid them). The first CPU ExecutionContext's Create then pays them, not a Run.
// Later calls do nothing. Thread-safe.
void WarmSgemm();

}  // namespace kiln::cpu
