// TopK: the k largest (or smallest) elements along an axis and their indices. Ties go to
// the lower index, as ONNX specifies; the output is always sorted (allowed for sorted=0); a
// NaN orders above +inf (docs/semantics.md). A K computed from tensor data is a run-time dim
// (KernelCall::runtime_size): the outputs have room for the whole axis and are written packed.
#include <algorithm>
#include <cstdint>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

size_t TopKWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef>) {
  if (inputs.empty() || !inputs[0].present() || inputs[0].rank < 1) return 0;
  int axis = 0;
  if (!NormalizeAxis(attrs.GetInt("axis", -1), inputs[0].rank, &axis)) return 0;
  return static_cast<size_t>(inputs[0].dims[axis]) * sizeof(int64_t);
}

Status TopK(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "TopK", 2, 2));
  const TensorRef &x = call.inputs[0], &kin = call.inputs[1], &vals = call.outputs[0], &inds = call.outputs[1];
  int axis = 0;
  const int64_t a = call.attrs.GetInt("axis", -1);
  if (x.rank < 1 || !NormalizeAxis(a, x.rank, &axis)) return OpError("TopK", "axis " + std::to_string(a) + " is out of range for " + ShapeStr(x));
  if (kin.dtype != DType::kInt64 || kin.num_elements != 1) return OpError("TopK", "K must be an int64 tensor of one element, got " + ShapeStr(kin));
  const int64_t k = kin.as<const int64_t>()[0], n = x.dims[axis];
  if (k < 0 || k > n) return OpError("TopK", "K = " + std::to_string(k) + " is outside [0, " + std::to_string(n) + "] (axis " + std::to_string(axis) + " of " + ShapeStr(x) + ")");
  const int64_t outer = Product(x.dims, 0, axis), inner = Product(x.dims, axis + 1, x.rank);
  if (vals.dtype != x.dtype || inds.dtype != DType::kInt64 || inds.num_elements != vals.num_elements ||
      (call.runtime_size ? vals.num_elements < outer * k * inner : vals.num_elements != outer * k * inner))
    return OpError("TopK", "outputs " + ShapeStr(vals) + " and " + ShapeStr(inds) + " do not match K = " + std::to_string(k) + " of " + ShapeStr(x));
  // K computed from tensor data: a run-time dim, the outputs packed [outer, K, inner].
  if (call.runtime_size) KILN_RETURN_IF_ERROR(ReportRuntimeSize(call, "TopK", k, true));
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, static_cast<size_t>(n) * sizeof(int64_t), "TopK"));
  int64_t* order = static_cast<int64_t*>(call.workspace);
  const bool largest = call.attrs.GetInt("largest", 1) != 0;
  const bool ok = VisitNumeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* pv = vals.as<T>();
    int64_t* pi = inds.as<int64_t>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* row = px + o * n * inner + i;
        for (int64_t j = 0; j < n; ++j) order[j] = j;
        // A strict weak order (a NaN compares unordered with everything, which would break
        // the sort): NaN above +inf, NaNs equal to each other (docs/semantics.md).
        auto above = [](T u, T v) { return IsNaN(u) ? !IsNaN(v) : (!IsNaN(v) && u > v); };
        std::partial_sort(order, order + k, order + n, [&](int64_t p, int64_t q) {
          const T u = row[p * inner], v = row[q * inner];
          if (above(u, v)) return largest;
          if (above(v, u)) return !largest;
          return p < q;
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t dst = (o * k + j) * inner + i;
          pv[dst] = row[order[j] * inner];
          pi[dst] = order[j];
        }
      }
  });
  if (!ok) return OpError("TopK", "unsupported dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"TopK", TopK, TopKWorkspace, false, {}, /*runtime_size=*/true},
};

}  // namespace

std::span<const KernelDef> TopKKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
