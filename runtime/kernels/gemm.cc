#include "runtime/kernels/gemm.h"

#include <algorithm>
#include <vector>

#include "runtime/cpu/onednn/onednn.h"
#include "runtime/kernels/selective.h"

namespace kiln::cpu {
namespace {

// The split over threads, the same for both GEMM implementations (gemm.h). Products below
// this many multiply-adds are one call. Above, blocks of at least kMinBlock columns (or
// rows), at most kMaxBlocks of them. Each block repacks the other operand and runs
// narrower OpenBLAS kernels, a cost a single thread pays too: ResNet-50 on one thread
// takes 81-84 ms this way against 77 ms unsplit, and on two threads 52 ms against 74 ms
// (medians, 2 idle cores). Blocks of 64 are what let its 3x3 convolutions, whose im2col
// tiles are 112-224 columns wide, use two threads; 4 blocks at most keep the one-thread
// cost at that (16 cost 84-86 ms).
constexpr double kMinSplitWork = double{1 << 22};
constexpr int64_t kMinBlock = 64;
constexpr int64_t kMaxBlocks = 4;

// The block length along C's columns (n >= m) or rows that ParallelSgemm uses.
int64_t BlockLength(int64_t m, int64_t n, int64_t k) {
  const int64_t extent = n >= m ? n : m;
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int64_t wanted = work < kMinSplitWork ? 1 : std::clamp<int64_t>(extent / kMinBlock, 1, kMaxBlocks);
  return std::min(extent, ((extent + wanted - 1) / wanted + 15) / 16 * 16);
}

}  // namespace

void Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (SgemmLibrary(m, n, k) == Library::kOneDnn && OneDnnSgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return;
  BlasSgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

Library SgemmLibrary(int64_t m, int64_t n, int64_t k) {
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return work >= kOneDnnSgemmMinWork && OneDnnBuilt() ? Library::kOneDnn : BlasLibrary();
}

void WarmSgemm() {
  if (!KeepsOneDnn() || !OneDnnBuilt()) return;  // dnnl_sgemm is what sets itself up at its first call
  // Once per process, on zeros: a one-row product (dnnl_sgemm's matrix-vector kernels) and a
  // 32x32x16 one (its GEMM kernels), each of kOneDnnSgemmMinWork multiply-adds, the smallest on
  // oneDNN. Each sets up its kind for every transposition.
  static const bool warmed = [] {
    std::vector<float> in(128 * 128), out(32 * 32);
    Sgemm(false, false, 1, 128, 128, 1.0f, in.data(), 128, in.data(), 128, 0.0f, out.data(), 128);
    Sgemm(false, false, 32, 32, 16, 1.0f, in.data(), 16, in.data(), 32, 0.0f, out.data(), 32);
    return true;
  }();
  static_cast<void>(warmed);
}

bool SgemmSplits(int64_t m, int64_t n, int64_t k) { return BlockLength(m, n, k) < (n >= m ? n : m); }

int64_t SgemmColumnBlock(int64_t m, int64_t n, int64_t k) { return n >= m ? BlockLength(m, n, k) : n; }

void ParallelSgemm(ThreadPool* threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const bool by_columns = n >= m;
  const int64_t extent = by_columns ? n : m;
  const int64_t block = BlockLength(m, n, k);
  const int64_t blocks = (extent + block - 1) / block;
  ParallelFor(threads, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t lo = u * block, len = std::min(extent, lo + block) - lo;
      if (by_columns) {
        Sgemm(ta, tb, m, len, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
      } else {
        Sgemm(ta, tb, len, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc, ldc);
      }
    }
  });
}

}  // namespace kiln::cpu
