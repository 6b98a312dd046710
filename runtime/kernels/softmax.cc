// Softmax, LogSoftmax and Hardmax along one axis (opset 13+), or over the flattened
// trailing dims when the Kiln attr coerce_2d=1 asks for pre-13 semantics.
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

template <typename T, SoftKind kKind>
void SoftRow(const T* x, T* y, int64_t n, int64_t stride) {
  if (n == 0) return;
  // The first maximum, or the first NaN (which no later value replaces): Hardmax's 1 goes
  // where ArgMax points (docs/semantics.md); Softmax of a row with a NaN is NaN either way.
  T mx = x[0];
  int64_t arg = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (BeatsMax(x[i * stride], mx)) {
      mx = x[i * stride];
      arg = i;
    }
  }
  if constexpr (kKind == SoftKind::kHardmax) {
    for (int64_t i = 0; i < n; ++i) y[i * stride] = i == arg ? T(1) : T(0);
  } else {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T e = std::exp(x[i * stride] - mx);
      if constexpr (kKind == SoftKind::kSoftmax) y[i * stride] = e;
      sum += e;
    }
    if constexpr (kKind == SoftKind::kSoftmax) {
      const T inv = static_cast<T>(1.0 / sum);
      for (int64_t i = 0; i < n; ++i) y[i * stride] *= inv;
    } else {
      const T lse = static_cast<T>(std::log(sum));
      for (int64_t i = 0; i < n; ++i) y[i * stride] = x[i * stride] - mx - lse;
    }
  }
}

template <SoftKind kKind>
Status SoftKernel(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, name));
  if (x.dtype != y.dtype) return OpError(name, "output dtype differs from input dtype");
  const bool coerce = call.attrs.GetInt("coerce_2d", 0) != 0;
  // Before opset 13 the default axis was 1; with coerce_2d the old meaning applies.
  const int64_t axis_attr = call.attrs.GetInt("axis", coerce ? 1 : -1);
  int axis = 0;
  const int rank = x.rank == 0 ? 1 : x.rank;
  if (!NormalizeAxis(axis_attr, rank, &axis) && !(coerce && axis_attr == rank)) {
    return OpError(name, "axis " + std::to_string(axis_attr) + " is out of range for input " + ShapeStr(x));
  }
  if (coerce && axis_attr == rank) axis = rank;
  int64_t outer, n, inner;
  if (x.rank == 0) {
    outer = n = inner = 1;
  } else if (coerce) {
    outer = Product(x.dims, 0, axis);
    n = Product(x.dims, axis, x.rank);
    inner = 1;
  } else {
    outer = Product(x.dims, 0, axis);
    n = x.dims[axis];
    inner = Product(x.dims, axis + 1, x.rank);
  }
  bool ok = VisitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t off = o * n * inner + i;
        SoftRow<T, kKind>(px + off, py + off, n, inner);
      }
  });
  if (!ok) return OpError(name, "expected float32 or float64, got " + DTypeStr(x.dtype));
  return Status::Ok();
}

Status Softmax(const KernelCall& c) { return SoftKernel<SoftKind::kSoftmax>(c, "Softmax"); }
Status LogSoftmax(const KernelCall& c) { return SoftKernel<SoftKind::kLogSoftmax>(c, "LogSoftmax"); }
Status Hardmax(const KernelCall& c) { return SoftKernel<SoftKind::kHardmax>(c, "Hardmax"); }

constexpr KernelDef kKernels[] = {
    {"Hardmax", Hardmax, nullptr},
    {"LogSoftmax", LogSoftmax, nullptr},
    {"Softmax", Softmax, nullptr},
};

}  // namespace

std::span<const KernelDef> SoftmaxKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
