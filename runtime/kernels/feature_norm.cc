// Older normalisation ops without learned parameters: LRN (across channels),
// LpNormalization (along one axis) and MeanVarianceNormalization (over a set of axes).
// All compute in double over float32/float64/float16/bfloat16 storage and round once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/kernels/families.h"
#include "runtime/kernels/float_storage.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

Status CheckFloatIO(const KernelCall& call, std::string_view op) {
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (!IsFloatStorage(x.dtype) || y.dtype != x.dtype)
    return OpError(op, "X and Y must share a float32, float64, float16 or bfloat16 dtype, got " + DTypeStr(x.dtype) +
                           " and " + DTypeStr(y.dtype));
  return CheckSameCount(x, y, op);
}

// y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta; the window of
// channel c is [c - floor((size-1)/2), c + ceil((size-1)/2)], clipped to the channels.
Status Lrn(const KernelCall& call) {
  constexpr std::string_view kName = "LRN";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  KILN_RETURN_IF_ERROR(CheckFloatIO(call, kName));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.rank < 2) return OpError(kName, "X must have rank >= 2 ([N, C, ...]), got " + ShapeStr(x));
  const int64_t size = call.attrs.GetInt("size", 0);
  if (size < 1) return OpError(kName, "size must be >= 1, got " + std::to_string(size));
  const double alpha = call.attrs.GetFloat("alpha", 1e-4f), beta = call.attrs.GetFloat("beta", 0.75f),
               bias = call.attrs.GetFloat("bias", 1.0f);
  const int64_t n = x.dims[0], c = x.dims[1], inner = Product(x.dims, 2, x.rank);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t lo = ch - before < 0 ? 0 : ch - before, hi = ch + after >= c ? c - 1 : ch + after;
      for (int64_t s = 0; s < inner; ++s) {
        double sq = 0;
        for (int64_t k = lo; k <= hi; ++k) {
          const double v = LoadFloat(x, (b * c + k) * inner + s);
          sq += v * v;
        }
        const int64_t at = (b * c + ch) * inner + s;
        StoreFloat(y, at, LoadFloat(x, at) / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
      }
    }
  return Status::Ok();
}

// y = x / ||x||_p along `axis` (p = 1 or 2); a zero norm gives 0, not 0/0, as ONNX's
// reference does.
Status LpNormalization(const KernelCall& call) {
  constexpr std::string_view kName = "LpNormalization";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  KILN_RETURN_IF_ERROR(CheckFloatIO(call, kName));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  int axis = 0;
  const int64_t a = call.attrs.GetInt("axis", -1), p = call.attrs.GetInt("p", 2);
  if (x.rank < 1 || !NormalizeAxis(a, x.rank, &axis))
    return OpError(kName, "axis " + std::to_string(a) + " is out of range for " + ShapeStr(x));
  if (p != 1 && p != 2) return OpError(kName, "p must be 1 or 2, got " + std::to_string(p));
  const int64_t outer = Product(x.dims, 0, axis), len = x.dims[axis], inner = Product(x.dims, axis + 1, x.rank);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * len * inner + i;
      double norm = 0;
      for (int64_t j = 0; j < len; ++j) {
        const double v = LoadFloat(x, base + j * inner);
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      for (int64_t j = 0; j < len; ++j) StoreFloat(y, base + j * inner, norm == 0 ? 0.0 : LoadFloat(x, base + j * inner) / norm);
    }
  return Status::Ok();
}

// The reduced axes of MeanVarianceNormalization (default {0, 2, 3}) as a mask; false when
// one is out of range.
bool MvnAxes(const AttrMap& attrs, int rank, bool* reduced) {
  const std::vector<int64_t>& given = attrs.GetInts("axes");
  const std::vector<int64_t> def = {0, 2, 3};
  for (int d = 0; d < rank; ++d) reduced[d] = false;
  for (int64_t a : attrs.Has("axes") ? given : def) {
    int d = 0;
    if (!NormalizeAxis(a, rank, &d)) return false;
    reduced[d] = true;
  }
  return true;
}

// Elements left after the reduction: one mean and one mean of squares each.
int64_t MvnGroups(const TensorRef& x, const bool* reduced) {
  int64_t g = 1;
  for (int d = 0; d < x.rank; ++d)
    if (!reduced[d]) g *= x.dims[d];
  return g;
}

size_t MvnWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef>) {
  bool reduced[kMaxRank];
  if (inputs.empty() || !inputs[0].present() || !MvnAxes(attrs, inputs[0].rank, reduced)) return 0;
  return static_cast<size_t>(MvnGroups(inputs[0], reduced)) * 2 * sizeof(double);
}

// y = (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9), statistics over `axes`, as the
// ONNX function body computes it.
Status MeanVarianceNormalization(const KernelCall& call) {
  constexpr std::string_view kName = "MeanVarianceNormalization";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  KILN_RETURN_IF_ERROR(CheckFloatIO(call, kName));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  bool reduced[kMaxRank];
  if (x.rank > kMaxRank || !MvnAxes(call.attrs, x.rank, reduced))
    return OpError(kName, "axes are out of range for " + ShapeStr(x));
  const int64_t groups = MvnGroups(x, reduced);
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, static_cast<size_t>(groups) * 2 * sizeof(double), kName));
  if (x.num_elements == 0) return Status::Ok();
  const int64_t count = x.num_elements / groups;
  // Each element's group: its index over the kept axes.
  int64_t group_stride[kMaxRank];
  int64_t stride = 1;
  for (int d = x.rank - 1; d >= 0; --d) {
    group_stride[d] = reduced[d] ? 0 : stride;
    if (!reduced[d]) stride *= x.dims[d];
  }
  double* sum = static_cast<double*>(call.workspace);
  double* sq = sum + groups;
  for (int64_t g = 0; g < 2 * groups; ++g) sum[g] = 0;
  NdIndex it(x.dims, x.rank);
  for (int64_t i = 0; i < x.num_elements; ++i, it.Next(x.rank)) {
    const int64_t g = it.Offset(group_stride, x.rank);
    const double v = LoadFloat(x, i);
    sum[g] += v;
    sq[g] += v * v;
  }
  for (int64_t g = 0; g < groups; ++g) {
    const double mean = sum[g] / count;
    sum[g] = mean;
    // Rounding can leave a zero variance slightly negative; a NaN (an infinite element makes
    // inf - inf) stays NaN, as the op's definition computes it (std::max would give 0).
    const double var = sq[g] / count - mean * mean;
    sq[g] = std::sqrt(var < 0.0 ? 0.0 : var) + 1e-9;
  }
  NdIndex jt(x.dims, x.rank);
  for (int64_t i = 0; i < x.num_elements; ++i, jt.Next(x.rank)) {
    const int64_t g = jt.Offset(group_stride, x.rank);
    StoreFloat(y, i, (LoadFloat(x, i) - sum[g]) / sq[g]);
  }
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"LRN", Lrn, nullptr, true},
    {"LpNormalization", LpNormalization, nullptr, true},
    {"MeanVarianceNormalization", MeanVarianceNormalization, MvnWorkspace, true},
};

}  // namespace

std::span<const KernelDef> FeatureNormKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
