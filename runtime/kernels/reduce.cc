// Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp) over a set of
// axes, and ArgMax/ArgMin along one axis.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// Which input axes are reduced. Axes come from input 1 (opset 13/18 form) or, for
// graphs the importer left in attribute form, from the `axes` attribute.
Status ReducedAxes(const KernelCall& call, std::string_view name, bool reduced[kMaxRank],
                   bool* noop) {
  const TensorRef& x = call.inputs[0];
  std::fill(reduced, reduced + kMaxRank, false);
  *noop = false;
  const TensorRef* axes = OptionalInput(call, 1);
  int64_t count = 0;
  if (axes) {
    if (!IsIndexType(axes->dtype)) return OpError(name, "axes must be int64, got " + DTypeStr(axes->dtype));
    count = axes->num_elements;
  } else {
    count = static_cast<int64_t>(call.attrs.GetInts("axes").size());
  }
  if (count == 0) {
    if (call.attrs.GetInt("noop_with_empty_axes", 0) != 0) {
      *noop = true;
    } else {
      std::fill(reduced, reduced + x.rank, true);
    }
    return Status::Ok();
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t a = axes ? IndexAt(*axes, i) : call.attrs.GetInts("axes")[i];
    int ax = 0;
    if (!NormalizeAxis(a, x.rank, &ax)) {
      return OpError(name, "axis " + std::to_string(a) + " is out of range for input " + ShapeStr(x));
    }
    reduced[ax] = true;
  }
  return Status::Ok();
}

template <Red kOp, typename T>
T InitValue() {
  if constexpr (kOp == Red::kMax || kOp == Red::kLogSumExp) {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                 : std::numeric_limits<T>::lowest();
  } else if constexpr (kOp == Red::kMin) {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                 : std::numeric_limits<T>::max();
  } else if constexpr (kOp == Red::kProd) {
    return T(1);
  } else {
    return T(0);
  }
}

template <Red kOp, typename T>
inline T Accumulate(T acc, T v) {
  // Once a NaN is seen it stays: MaxNaN/MinNaN pass a NaN in their first operand on.
  if constexpr (kOp == Red::kMax) return IsNaN(acc) ? acc : MaxNaN(v, acc);
  else if constexpr (kOp == Red::kMin) return IsNaN(acc) ? acc : MinNaN(v, acc);
  // Integers wrap on overflow (kernel_util.h), as Add and Mul do.
  else if constexpr (kOp == Red::kProd) return WrapMul(acc, v);
  else if constexpr (kOp == Red::kL1) return WrapAdd(acc, v < T(0) ? WrapSub(T(0), v) : v);
  else if constexpr (kOp == Red::kL2 || kOp == Red::kSumSquare) return WrapAdd(acc, WrapMul(v, v));
  else return WrapAdd(acc, v);
}

// Visits every input element with the offset of the output element it reduces into.
template <typename F>
void ForEachReduced(const TensorRef& x, const bool reduced[kMaxRank], F f) {
  if (x.num_elements == 0) return;
  if (x.rank == 0) {
    f(0, 0);
    return;
  }
  int64_t out_strides[kMaxRank];
  int64_t s = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    out_strides[i] = reduced[i] ? 0 : s;
    if (!reduced[i]) s *= x.dims[i];
  }
  const int r = x.rank;
  const int64_t inner = x.dims[r - 1], is = out_strides[r - 1];
  NdIndex it(x.dims, r);
  int64_t in = 0;
  do {
    const int64_t base = it.Offset(out_strides, r - 1);
    for (int64_t j = 0; j < inner; ++j) f(in + j, base + j * is);
    in += inner;
  } while (it.Next(r - 1));
}

size_t ReduceLogSumExpWorkspace(const AttrMap&, std::span<const TensorRef>,
                                std::span<const TensorRef> outputs) {
  return outputs.empty() || !outputs[0].present() ? 0
                                                  : static_cast<size_t>(outputs[0].num_elements) * sizeof(double);
}

template <Red kOp>
Status ReduceKernel(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.dtype != y.dtype) return OpError(name, "output dtype differs from input dtype");
  bool reduced[kMaxRank];
  bool noop = false;
  KILN_RETURN_IF_ERROR(ReducedAxes(call, name, reduced, &noop));
  if (noop) {
    // A reduction over no axes reduces each element alone (ONNX opset 18): an identity for
    // Sum, Mean, Max, Min and Prod, but |x|, x^2, log(x) for L1, L2, SumSquare, LogSum, which
    // the general path below computes with every axis kept.
    KILN_RETURN_IF_ERROR(CheckSameCount(x, y, name));
    if constexpr (kOp == Red::kSum || kOp == Red::kMean || kOp == Red::kMax || kOp == Red::kMin ||
                  kOp == Red::kProd) {
      if (x.data != y.data && x.num_elements) std::memmove(y.data, x.data, x.num_elements * DTypeSize(x.dtype));
      return Status::Ok();
    }
  }
  int64_t kept = 1, count = 1;
  for (int i = 0; i < x.rank; ++i) (reduced[i] ? count : kept) *= x.dims[i];
  if (y.num_elements != kept) {
    return OpError(name, "output " + ShapeStr(y) + " should have " + std::to_string(kept) +
                             " elements for input " + ShapeStr(x));
  }
  double* lse = nullptr;
  if constexpr (kOp == Red::kLogSumExp) {
    KILN_RETURN_IF_ERROR(CheckWorkspace(call, kept * sizeof(double), name));
    lse = static_cast<double*>(call.workspace);
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    if constexpr (kOp == Red::kLogSumExp) {
      // Shift by the max so exp cannot overflow.
      for (int64_t i = 0; i < kept; ++i) {
        py[i] = InitValue<Red::kMax, T>();
        lse[i] = 0;
      }
      ForEachReduced(x, reduced, [&](int64_t i, int64_t o) { py[o] = Accumulate<Red::kMax, T>(py[o], px[i]); });
      // An infinite max shifts by 0 (exp(inf - inf) would be NaN): a row with +inf sums to
      // +inf, one of only -inf to 0, whose log is -inf; the fused programs do the same.
      ForEachReduced(x, reduced, [&](int64_t i, int64_t o) {
        const double m = std::isinf(static_cast<double>(py[o])) ? 0.0 : static_cast<double>(py[o]);
        lse[o] += std::exp(static_cast<double>(px[i]) - m);
      });
      for (int64_t i = 0; i < kept; ++i) {
        const double m = std::isinf(static_cast<double>(py[i])) ? 0.0 : static_cast<double>(py[i]);
        py[i] = static_cast<T>(m + std::log(lse[i]));
      }
      return;
    } else {
      const T init = InitValue<kOp, T>();
      for (int64_t i = 0; i < kept; ++i) py[i] = init;
      ForEachReduced(x, reduced, [&](int64_t i, int64_t o) { py[o] = Accumulate<kOp, T>(py[o], px[i]); });
      for (int64_t i = 0; i < kept; ++i) {
        if constexpr (kOp == Red::kMean) {
          py[i] = FromDouble<T>(static_cast<double>(py[i]) / static_cast<double>(count));
        } else if constexpr (kOp == Red::kL2) {
          py[i] = FromDouble<T>(std::sqrt(static_cast<double>(py[i])));
        } else if constexpr (kOp == Red::kLogSum) {
          py[i] = FromDouble<T>(std::log(static_cast<double>(py[i])));
        }
      }
    }
  };
  // Bool Max/Min (opset 20) are any/all, which uint8 0/1 computes.
  if constexpr (kOp == Red::kMax || kOp == Red::kMin) {
    if (x.dtype == DType::kBool) {
      run(uint8_t{});
      // An empty Min (all of nothing) is true: 1, not uint8's 255.
      if constexpr (kOp == Red::kMin) {
        uint8_t* py = y.as<uint8_t>();
        for (int64_t i = 0; i < kept; ++i) py[i] = py[i] != 0;
      }
      return Status::Ok();
    }
  }
  bool ok = VisitNumeric(x.dtype, [&](auto tag) { run(tag); });
  if (!ok) return OpError(name, "unsupported dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

Status ReduceSum(const KernelCall& c) { return ReduceKernel<Red::kSum>(c, "ReduceSum"); }
Status ReduceMean(const KernelCall& c) { return ReduceKernel<Red::kMean>(c, "ReduceMean"); }
Status ReduceMax(const KernelCall& c) { return ReduceKernel<Red::kMax>(c, "ReduceMax"); }
Status ReduceMin(const KernelCall& c) { return ReduceKernel<Red::kMin>(c, "ReduceMin"); }
Status ReduceProd(const KernelCall& c) { return ReduceKernel<Red::kProd>(c, "ReduceProd"); }
Status ReduceL1(const KernelCall& c) { return ReduceKernel<Red::kL1>(c, "ReduceL1"); }
Status ReduceL2(const KernelCall& c) { return ReduceKernel<Red::kL2>(c, "ReduceL2"); }
Status ReduceSumSquare(const KernelCall& c) { return ReduceKernel<Red::kSumSquare>(c, "ReduceSumSquare"); }
Status ReduceLogSum(const KernelCall& c) { return ReduceKernel<Red::kLogSum>(c, "ReduceLogSum"); }
Status ReduceLogSumExp(const KernelCall& c) { return ReduceKernel<Red::kLogSumExp>(c, "ReduceLogSumExp"); }

template <bool kMax>
Status ArgKernel(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (y.dtype != DType::kInt64) return OpError(name, "output must be int64, got " + DTypeStr(y.dtype));
  int axis = 0;
  const int64_t a = call.attrs.GetInt("axis", 0);
  if (!NormalizeAxis(a, x.rank, &axis)) {
    return OpError(name, "axis " + std::to_string(a) + " is out of range for input " + ShapeStr(x));
  }
  const int64_t outer = Product(x.dims, 0, axis), n = x.dims[axis];
  const int64_t inner = Product(x.dims, axis + 1, x.rank);
  if (y.num_elements != outer * inner) {
    return OpError(name, "output " + ShapeStr(y) + " should have " + std::to_string(outer * inner) + " elements");
  }
  if (n == 0 && y.num_elements > 0) return OpError(name, "cannot take the arg of an empty axis");
  const bool last = call.attrs.GetInt("select_last_index", 0) != 0;
  bool ok = VisitNumeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    int64_t* py = y.as<int64_t>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* row = px + o * n * inner + i;
        T best = row[0];
        int64_t arg = 0;
        for (int64_t k = 1; k < n; ++k) {
          const T v = row[k * inner];
          // A NaN is the extreme either way: the first NaN wins (the last with
          // select_last_index), as numpy's argmax/argmin (docs/semantics.md).
          bool better;
          if (IsNaN(best)) better = last && IsNaN(v);
          else if (IsNaN(v)) better = true;
          else better = kMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
          if (better) {
            best = v;
            arg = k;
          }
        }
        py[o * inner + i] = arg;
      }
  });
  if (!ok) return OpError(name, "unsupported dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

Status ArgMax(const KernelCall& c) { return ArgKernel<true>(c, "ArgMax"); }
Status ArgMin(const KernelCall& c) { return ArgKernel<false>(c, "ArgMin"); }

constexpr KernelDef kKernels[] = {
    {"ArgMax", ArgMax, nullptr},
    {"ArgMin", ArgMin, nullptr},
    {"ReduceL1", ReduceL1, nullptr},
    {"ReduceL2", ReduceL2, nullptr},
    {"ReduceLogSum", ReduceLogSum, nullptr},
    {"ReduceLogSumExp", ReduceLogSumExp, ReduceLogSumExpWorkspace},
    {"ReduceMax", ReduceMax, nullptr},
    {"ReduceMean", ReduceMean, nullptr},
    {"ReduceMin", ReduceMin, nullptr},
    {"ReduceProd", ReduceProd, nullptr},
    {"ReduceSum", ReduceSum, nullptr},
    {"ReduceSumSquare", ReduceSumSquare, nullptr},
};

}  // namespace

std::span<const KernelDef> ReduceKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
