// gemm.h's GEMMs on OpenBLAS (CMake KILN_WITH_BLAS=ON, the default).
#include <cblas.h>

#include "runtime/kernels/gemm.h"

namespace kiln::cpu {

Library BlasLibrary() { return Library::kOpenBlas; }

void BlasSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void Dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
           const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

// OpenBLAS keeps one process-wide count (include/kiln/runtime.h says so). Kiln splits its
// GEMMs over its own threads (gemm.h says why), so OpenBLAS's are never used.
void PrepareGemmThreads() { openblas_set_num_threads(1); }

}  // namespace kiln::cpu
