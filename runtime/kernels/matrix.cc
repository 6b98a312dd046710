// Ops over the last two axes as matrices: Trilu (keep a triangle), EyeLike (an identity
// with a shifted diagonal) and Det (the determinant of each matrix of a batch).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

// The diagonal offset k: input 1 (an int64 scalar) or 0.
Status DiagonalK(const KernelCall& call, std::string_view name, int64_t* k) {
  *k = 0;
  const TensorRef* kin = OptionalInput(call, 1);
  if (!kin) return Status::Ok();
  if (kin->dtype != DType::kInt64 || kin->num_elements != 1)
    return OpError(name, "k must be an int64 scalar, got " + DTypeStr(kin->dtype) + " " + ShapeStr(*kin));
  *k = kin->as<const int64_t>()[0];
  return Status::Ok();
}

// Trilu keeps element (i, j) of each matrix where j - i >= k (upper) or j - i <= k (lower).
Status Trilu(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "Trilu", 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, "Trilu"));
  if (x.rank < 2 || x.dtype != y.dtype) return OpError("Trilu", "expected a rank >= 2 input and an output of its dtype, got " + ShapeStr(x));
  int64_t k = 0;
  KILN_RETURN_IF_ERROR(DiagonalK(call, "Trilu", &k));
  const bool upper = call.attrs.GetInt("upper", 1) != 0;
  const int64_t rows = x.dims[x.rank - 2], cols = x.dims[x.rank - 1];
  const int64_t batch = rows * cols == 0 ? 0 : x.num_elements / (rows * cols);
  const bool ok = VisitBySize(DTypeSize(x.dtype), [&](auto tag) {
    using U = decltype(tag);
    const U* px = x.as<const U>();
    U* py = y.as<U>();
    for (int64_t m = 0; m < batch; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t o = (m * rows + i) * cols + j;
          py[o] = (upper ? j - i >= k : j - i <= k) ? px[o] : U(0);
        }
  });
  if (!ok) return OpError("Trilu", "unsupported dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

// The bit pattern of 1 in dtype `dt`, written to `out`; false for dtypes without one.
bool OneOf(DType dt, uint64_t* out) {
  switch (dt) {
    case DType::kFloat16: *out = 0x3c00; return true;
    case DType::kBFloat16: *out = 0x3f80; return true;
    case DType::kBool: *out = 1; return true;
    default: break;
  }
  return VisitNumeric(dt, [&](auto tag) {
    using T = decltype(tag);
    const T one = T(1);
    *out = 0;
    std::memcpy(out, &one, sizeof(T));
  });
}

Status EyeLike(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "EyeLike", 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.rank != 2 || y.rank != 2 || x.dims[0] != y.dims[0] || x.dims[1] != y.dims[1])
    return OpError("EyeLike", "expected a 2-D input and an output of its shape, got " + ShapeStr(x) + " -> " + ShapeStr(y));
  uint64_t one = 0;
  if (!OneOf(y.dtype, &one)) return OpError("EyeLike", "unsupported output dtype " + DTypeStr(y.dtype));
  const int64_t k = call.attrs.GetInt("k", 0), rows = y.dims[0], cols = y.dims[1];
  const size_t es = DTypeSize(y.dtype);
  auto* py = static_cast<uint8_t*>(y.data);
  if (y.num_elements) std::memset(py, 0, static_cast<size_t>(y.num_elements) * es);
  for (int64_t i = 0; i < rows; ++i)
    if (i + k >= 0 && i + k < cols) std::memcpy(py + (i * cols + i + k) * es, &one, es);
  return Status::Ok();
}

size_t DetWorkspace(const AttrMap&, std::span<const TensorRef> inputs, std::span<const TensorRef>) {
  if (inputs.empty() || inputs[0].rank < 2) return 0;
  const int64_t n = inputs[0].dims[inputs[0].rank - 1];
  return static_cast<size_t>(n * n) * sizeof(double);
}

// Determinant by LU decomposition with partial pivoting, in double.
double Determinant(double* a, int64_t n) {
  double det = 1.0;
  for (int64_t c = 0; c < n; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r * n + c]) > std::fabs(a[p * n + c])) p = r;
    if (a[p * n + c] == 0.0) return 0.0;
    if (p != c) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[p * n + j], a[c * n + j]);
      det = -det;
    }
    det *= a[c * n + c];
    for (int64_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / a[c * n + c];
      for (int64_t j = c; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
    }
  }
  return det;
}

Status Det(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "Det", 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.rank < 2 || x.dims[x.rank - 1] != x.dims[x.rank - 2] || x.dtype != y.dtype)
    return OpError("Det", "expected square matrices [..., M, M] and an output of their dtype, got " + ShapeStr(x));
  const int64_t n = x.dims[x.rank - 1];
  if (y.num_elements * n * n != x.num_elements)
    return OpError("Det", "output " + ShapeStr(y) + " does not match the batch of " + ShapeStr(x));
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, static_cast<size_t>(n * n) * sizeof(double), "Det"));
  double* a = static_cast<double*>(call.workspace);
  const bool ok = VisitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t m = 0; m < y.num_elements; ++m) {
      const T* px = x.as<const T>() + m * n * n;
      for (int64_t i = 0; i < n * n; ++i) a[i] = static_cast<double>(px[i]);
      y.as<T>()[m] = static_cast<T>(Determinant(a, n));
    }
  });
  if (!ok) return OpError("Det", "expected a float32 or float64 input, got " + DTypeStr(x.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"Det", Det, DetWorkspace},
    {"EyeLike", EyeLike, nullptr, true},
    {"Trilu", Trilu, nullptr, true},
};

}  // namespace

std::span<const KernelDef> MatrixKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
