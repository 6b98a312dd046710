// gemm.h's GEMMs without BLAS (CMake KILN_WITH_BLAS=OFF): Kiln's portable GEMM
// (runtime/kernels/gemm_portable.h says what that changes).
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/gemm_portable.h"

namespace kiln::cpu {

Library BlasLibrary() { return Library::kCpuKernel; }

void BlasSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  portable::Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
           const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  portable::Dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The portable GEMM has no threads of its own.
void PrepareGemmThreads() {}

}  // namespace kiln::cpu
