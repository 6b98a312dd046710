// CumSum and CumProd: a running sum or product along `axis` (input 1, read at run time),
// inclusive or `exclusive` (the first element gets the identity), forward or `reverse`.
// float16/bfloat16 accumulate in float and round to the element type after every step,
// as numpy's cumsum/cumprod of those types do.
#include <cstdint>
#include <type_traits>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/half.h"

namespace kiln::cpu {
namespace {

enum class Combine { kSum, kProd };

struct Half16 { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

// The element type's accumulator and conversions.
template <typename T> struct Elem {
  using Acc = T;
  static Acc Load(T x) { return x; }
  static T Store(Acc a) { return a; }
};
template <> struct Elem<Half16> {
  using Acc = float;
  static Acc Load(Half16 x) { return HalfToFloat(x.bits); }
  static Half16 Store(Acc a) { return {FloatToHalf(a)}; }
};
template <> struct Elem<BFloat16> {
  using Acc = float;
  static Acc Load(BFloat16 x) { return BF16ToFloat(x.bits); }
  static BFloat16 Store(Acc a) { return {FloatToBF16(a)}; }
};

// Integers wrap on overflow (computed unsigned, which C++ defines) rather than invoke
// undefined behavior; ONNX leaves the result unspecified.
template <typename A>
A Apply(Combine op, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(op == Combine::kSum ? static_cast<U>(static_cast<U>(a) + static_cast<U>(b))
                                              : static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return op == Combine::kSum ? a + b : a * b;
  }
}

template <typename T>
void Scan(Combine op, bool exclusive, bool reverse, const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using E = Elem<T>;
  using Acc = typename E::Acc;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      T acc = E::Store(op == Combine::kSum ? Acc(0) : Acc(1));
      for (int64_t s = 0; s < n; ++s) {
        const int64_t at = base + (reverse ? n - 1 - s : s) * inner;
        const T next = E::Store(Apply<Acc>(op, E::Load(acc), E::Load(x[at])));
        y[at] = exclusive ? acc : next;
        acc = next;
      }
    }
  }
}

// Calls f(T{}) for the element types of CumSum/CumProd; false for the others.
template <typename F>
bool VisitCumulative(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32: f(float{}); return true;
    case DType::kFloat64: f(double{}); return true;
    case DType::kFloat16: f(Half16{}); return true;
    case DType::kBFloat16: f(BFloat16{}); return true;
    case DType::kInt32: f(int32_t{}); return true;
    case DType::kInt64: f(int64_t{}); return true;
    case DType::kUInt32: f(uint32_t{}); return true;
    case DType::kUInt64: f(uint64_t{}); return true;
    default: return false;
  }
}

template <Combine kOp>
Status CumulativeKernel(const KernelCall& call) {
  constexpr std::string_view kName = kOp == Combine::kSum ? "CumSum" : "CumProd";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef& x = call.inputs[0];
  const TensorRef& axis_t = call.inputs[1];
  const TensorRef& y = call.outputs[0];
  if (!IsIndexType(axis_t.dtype) || axis_t.num_elements != 1)
    return OpError(kName, "axis must be one int32/int64 value, found " + DTypeStr(axis_t.dtype) + " " +
                              ShapeStr(axis_t));
  int axis = 0;
  if (!NormalizeAxis(IndexAt(axis_t, 0), x.rank, &axis))
    return OpError(kName, "axis " + std::to_string(IndexAt(axis_t, 0)) + " is outside [-" +
                              std::to_string(x.rank) + ", " + std::to_string(x.rank) + ") for x " + ShapeStr(x));
  if (y.dtype != x.dtype || y.num_elements != x.num_elements)
    return OpError(kName, "output " + DTypeStr(y.dtype) + " " + ShapeStr(y) + " does not match x " +
                              DTypeStr(x.dtype) + " " + ShapeStr(x));
  const bool exclusive = call.attrs.GetInt("exclusive", 0) != 0;
  const bool reverse = call.attrs.GetInt("reverse", 0) != 0;
  const int64_t outer = Product(x.dims, 0, axis), n = x.dims[axis], inner = Product(x.dims, axis + 1, x.rank);
  const bool ok = VisitCumulative(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    Scan<T>(kOp, exclusive, reverse, x.as<const T>(), y.as<T>(), outer, n, inner);
  });
  if (!ok) return OpUnimplemented(kName, "dtype " + DTypeStr(x.dtype) + " is not supported");
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"CumProd", CumulativeKernel<Combine::kProd>, nullptr, true},
    {"CumSum", CumulativeKernel<Combine::kSum>, nullptr, true},
};

}  // namespace

std::span<const KernelDef> CumulativeKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
