// MatMul (numpy-style batched, with ONNX's 1-D promotion rules) and Gemm, on gemm.h, with
// the epilogue annotations of compiler/passes/epilogue.h (a MatMul bias, a residual, an
// activation) applied to each GEMM's output while it is still in cache.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/kernels/epilogue.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

// C[m,n] = A[m,k] * B[k,n] (+ C when accumulate), row-major, any leading dims. float32
// GEMMs are split over `threads` (runtime/kernels/gemm.h).
template <typename T>
void Gemm(ThreadPool* threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    // BLAS would work too, but a zero K makes lda invalid for some implementations.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    ParallelSgemm(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    Dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const T av = ta ? a[p * lda + i] : a[i * lda + p];
          const T bv = tb ? b[j * ldb + p] : b[p * ldb + j];
          acc += av * bv;
        }
        c[i * ldc + j] = alpha * acc + (beta == T(0) ? T(0) : beta * c[i * ldc + j]);
      }
    }
  }
}

// Whether a batched MatMul's items may go to the threads whole. Not in a selective runtime
// (runtime/kernels/selective.h), built for size: there each item's product is cut instead, and
// this path's code would cost its 300,000-byte budget.
#if KILN_SELECTIVE
constexpr bool kBatchItemsOnThreads = false;
#else
constexpr bool kBatchItemsOnThreads = true;
#endif

// Calls f(T{}) for the dtypes MatMul and Gemm take; false for others.
template <typename F>
bool VisitGemmType(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32: f(float{}); return true;
    case DType::kFloat64: f(double{}); return true;
    case DType::kInt32: f(int32_t{}); return true;
    case DType::kInt64: f(int64_t{}); return true;
    default: return false;
  }
}

Status MatMulKernel(const KernelCall& call) {
  constexpr std::string_view kName = "MatMul";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  if (a.rank < 1 || b.rank < 1) {
    return OpError(kName, "operands must have rank >= 1, got " + ShapeStr(a) + " and " + ShapeStr(b));
  }
  if (a.dtype != b.dtype || a.dtype != y.dtype) {
    return OpError(kName, "dtypes differ: " + DTypeStr(a.dtype) + ", " + DTypeStr(b.dtype) +
                              " -> " + DTypeStr(y.dtype));
  }
  const bool a_vec = a.rank == 1, b_vec = b.rank == 1;
  const int64_t m = a_vec ? 1 : a.dims[a.rank - 2];
  const int64_t k = a.dims[a.rank - 1];
  const int64_t kb = b_vec ? b.dims[0] : b.dims[b.rank - 2];
  const int64_t n = b_vec ? 1 : b.dims[b.rank - 1];
  if (k != kb) {
    return OpError(kName, "inner dimensions differ: " + ShapeStr(a) + " x " + ShapeStr(b));
  }
  // Batch dims: those of A and B broadcast; the output carries them followed by M and N
  // (each dropped for a 1-D operand).
  const int a_batch = a_vec ? 0 : a.rank - 2, b_batch = b_vec ? 0 : b.rank - 2;
  const int tail = (a_vec ? 0 : 1) + (b_vec ? 0 : 1);
  const int batch_rank = y.rank - tail;
  if (batch_rank < 0 || batch_rank < a_batch || batch_rank < b_batch || batch_rank > kMaxRank) {
    return OpError(kName, "output " + ShapeStr(y) + " does not fit inputs " + ShapeStr(a) +
                              " x " + ShapeStr(b));
  }
  if ((!a_vec && y.dims[batch_rank] != m) || (!b_vec && y.dims[y.rank - 1] != n)) {
    return OpError(kName, "output " + ShapeStr(y) + " does not match inputs " + ShapeStr(a) +
                              " x " + ShapeStr(b));
  }
  int64_t sa[kMaxRank] = {}, sb[kMaxRank] = {};
  if (!BroadcastStrides(a.dims, a_batch, y.dims, batch_rank, sa) ||
      !BroadcastStrides(b.dims, b_batch, y.dims, batch_rank, sb)) {
    return OpError(kName, "batch dimensions of " + ShapeStr(a) + " and " + ShapeStr(b) +
                              " do not broadcast to output " + ShapeStr(y));
  }
  // The annotated form's bias: one value per output column, added by the GEMM (beta = 1
  // onto rows that start as the bias).
  const TensorRef* bias = OptionalInput(call, kEpilogueBiasInput);
  if (bias) {
    if (a.dtype != DType::kFloat32 && a.dtype != DType::kFloat64) {
      return OpError(kName, "a bias needs float32 or float64 operands, found " + DTypeStr(a.dtype));
    }
    if (b_vec || bias->dtype != a.dtype || bias->rank != 1 || bias->dims[0] != n) {
      return OpError(kName, "bias " + ShapeStr(*bias) + " " + DTypeStr(bias->dtype) + " must be a " +
                                DTypeStr(a.dtype) + " vector of the " + std::to_string(n) +
                                " output columns (B " + ShapeStr(b) + " must be at least 2-D)");
    }
  }
  Epilogue epilogue;
  KILN_RETURN_IF_ERROR(ReadEpilogue(call, kName, &epilogue));
  const int64_t batch = Product(y.dims, 0, batch_rank);
  const int64_t a_count = Product(a.dims, 0, a_batch), b_count = Product(b.dims, 0, b_batch);
  auto run = [&](const auto* pa, const auto* pb, auto* py) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(pa)>>;
    if (batch == 0) return;
    const T beta = bias ? T(1) : T(0);
    if (bias && n > 0) {
      const T* pbias = bias->as<const T>();
      for (int64_t r = 0, rows = y.num_elements / n; r < rows; ++r) std::copy(pbias, pbias + n, py + r * n);
    }
    // A shared right operand lets the whole batch go through one GEMM.
    if (b_count == 1 && a_count == batch) {
      Gemm<T>(call.threads, false, false, batch * m, n, k, T(1), pa, k, pb, n, beta, py, n);
      ApplyEpilogue(epilogue, y);
      return;
    }
    // One product per batch item. Items too small for ParallelSgemm to cut (attention's
    // [h, S, S] products), or at least as many as threads, go to the threads whole; otherwise
    // each is cut. Either way the calls, so the bits, depend on the shapes only.
    auto item = [&](int64_t i, ThreadPool* threads) {
      NdIndex it(y.dims, batch_rank);
      for (int64_t d = batch_rank - 1, r = i; d >= 0; r /= y.dims[d], --d) it.idx[d] = r % y.dims[d];  // last axis fastest
      const int64_t oa = it.Offset(sa, batch_rank) * m * k;
      const int64_t ob = it.Offset(sb, batch_rank) * k * n;
      Gemm<T>(threads, false, false, m, n, k, T(1), pa + oa, k, pb + ob, n, beta, py + i * m * n, n);
      ApplyEpilogue(epilogue, y, i * m * n, m * n);
    };
    const int threads = call.threads ? call.threads->size() : 1;
    if (kBatchItemsOnThreads && batch > 1 && threads > 1 && (!SgemmSplits(m, n, k) || batch >= threads)) {
      ParallelFor(call.threads, batch, MinItemsPerPart(m * n * k),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) item(i, nullptr);
                  });
    } else {
      for (int64_t i = 0; i < batch; ++i) item(i, call.threads);
    }
  };
  if (!VisitGemmType(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        run(a.as<const T>(), b.as<const T>(), y.as<T>());
      }))
    return OpError(kName, "unsupported dtype " + DTypeStr(a.dtype));
  return Status::Ok();
}

Status GemmKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Gemm";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  const TensorRef* c = OptionalInput(call, 2);
  if (a.rank != 2 || b.rank != 2 || y.rank != 2) {
    return OpError(kName, "A, B and Y must be 2-D, got " + ShapeStr(a) + ", " + ShapeStr(b) +
                              ", " + ShapeStr(y));
  }
  if (a.dtype != b.dtype || a.dtype != y.dtype || (c && c->dtype != a.dtype)) {
    return OpError(kName, "operand dtypes differ");
  }
  const bool ta = call.attrs.GetInt("transA", 0) != 0;
  const bool tb = call.attrs.GetInt("transB", 0) != 0;
  const double alpha = call.attrs.GetFloat("alpha", 1.0f);
  double beta = call.attrs.GetFloat("beta", 1.0f);
  const int64_t m = ta ? a.dims[1] : a.dims[0];
  const int64_t k = ta ? a.dims[0] : a.dims[1];
  const int64_t kb = tb ? b.dims[1] : b.dims[0];
  const int64_t n = tb ? b.dims[0] : b.dims[1];
  if (k != kb) {
    return OpError(kName, "inner dimensions differ: A " + ShapeStr(a) + (ta ? " (transposed)" : "") +
                              ", B " + ShapeStr(b) + (tb ? " (transposed)" : ""));
  }
  if (y.dims[0] != m || y.dims[1] != n) {
    return OpError(kName, "output " + ShapeStr(y) + " should be " + ShapeText(std::vector<int64_t>{m, n}));
  }
  int64_t sc[2] = {};
  if (c && !BroadcastStrides(c->dims, c->rank, y.dims, 2, sc)) {
    return OpError(kName, "C " + ShapeStr(*c) + " does not broadcast to " + ShapeStr(y));
  }
  if (!c) beta = 0;
  Epilogue epilogue;
  KILN_RETURN_IF_ERROR(ReadEpilogue(call, kName, &epilogue));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* py = y.as<T>();
    if (beta != 0) {
      // Y starts as C broadcast, so the GEMM can accumulate into it with beta.
      const T* pc = c->as<const T>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) py[i * n + j] = pc[i * sc[0] + j * sc[1]];
    }
    Gemm<T>(call.threads, ta, tb, m, n, k, static_cast<T>(alpha), a.as<const T>(), a.dims[1], b.as<const T>(),
            b.dims[1], static_cast<T>(beta), py, n);
    ApplyEpilogue(epilogue, y);
  };
  if (!VisitGemmType(a.dtype, run)) return OpError(kName, "unsupported dtype " + DTypeStr(a.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"Gemm", GemmKernel, nullptr},
    {"MatMul", MatMulKernel, nullptr},
};

}  // namespace

std::span<const KernelDef> MatMulKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
