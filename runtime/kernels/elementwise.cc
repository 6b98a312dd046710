// Elementwise binary, variadic and ternary ops with numpy multidirectional broadcasting:
// arithmetic, comparison, logic, Mod, Pow, PRelu, Max/Min/Sum/Mean and Where. Arithmetic
// and Max/Min/Mod also take float16/bfloat16, computed in float and rounded back.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/half.h"

namespace kiln::cpu {
namespace {

// Applies op over the broadcast of a and b into out. Element counts decide the fast
// paths: with broadcasting only ever expanding size-1 dims, an input with as many
// elements as the output has the output's layout.
template <typename A, typename B, typename R, typename Op>
void Broadcast2(const TensorRef& a, const TensorRef& b, const TensorRef& out, Op op) {
  const A* pa = a.as<const A>();
  const B* pb = b.as<const B>();
  R* po = out.as<R>();
  const int64_t n = out.num_elements;
  if (n == 0) return;
  const bool a_full = a.num_elements == n, b_full = b.num_elements == n;
  if (a_full && b_full) {
    for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], pb[i]);
    return;
  }
  if (a_full && b.num_elements == 1) {
    const B s = pb[0];
    for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], s);
    return;
  }
  if (b_full && a.num_elements == 1) {
    const A s = pa[0];
    for (int64_t i = 0; i < n; ++i) po[i] = op(s, pb[i]);
    return;
  }
  const int r = out.rank;
  int64_t sa[kMaxRank] = {}, sb[kMaxRank] = {};
  BroadcastStrides(a, out, sa);
  BroadcastStrides(b, out, sb);
  const int64_t inner = out.dims[r - 1], ia = sa[r - 1], ib = sb[r - 1];
  NdIndex it(out.dims, r);
  int64_t o = 0;
  do {
    const A* ra = pa + it.Offset(sa, r - 1);
    const B* rb = pb + it.Offset(sb, r - 1);
    R* ro = po + o;
    if (ia == 1 && ib == 0) {
      const B s = rb[0];
      for (int64_t j = 0; j < inner; ++j) ro[j] = op(ra[j], s);
    } else if (ia == 0 && ib == 1) {
      const A s = ra[0];
      for (int64_t j = 0; j < inner; ++j) ro[j] = op(s, rb[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j) ro[j] = op(ra[j * ia], rb[j * ib]);
    }
    o += inner;
  } while (it.Next(r - 1));
}

enum class Bin {
  kAdd, kSub, kMul, kDiv, kMax, kMin, kMod, kPRelu,
  kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual,
  kAnd, kOr, kXor,
};

constexpr std::string_view BinName(Bin op) {
  switch (op) {
    case Bin::kAdd: return "Add";
    case Bin::kSub: return "Sub";
    case Bin::kMul: return "Mul";
    case Bin::kDiv: return "Div";
    case Bin::kMax: return "Max";
    case Bin::kMin: return "Min";
    case Bin::kMod: return "Mod";
    case Bin::kPRelu: return "PRelu";
    case Bin::kEqual: return "Equal";
    case Bin::kLess: return "Less";
    case Bin::kGreater: return "Greater";
    case Bin::kLessOrEqual: return "LessOrEqual";
    case Bin::kGreaterOrEqual: return "GreaterOrEqual";
    case Bin::kAnd: return "And";
    case Bin::kOr: return "Or";
    case Bin::kXor: return "Xor";
  }
  return "?";
}

constexpr bool IsCompare(Bin op) {
  return op == Bin::kEqual || op == Bin::kLess || op == Bin::kGreater ||
         op == Bin::kLessOrEqual || op == Bin::kGreaterOrEqual;
}
constexpr bool IsLogic(Bin op) { return op == Bin::kAnd || op == Bin::kOr || op == Bin::kXor; }

// Integer Div and Mod by zero give 0, and INT_MIN / -1 wraps to INT_MIN (remainder 0): the
// policy of docs/semantics.md, which the fused programs and generated kernels follow too.
template <Bin kOp, typename T>
struct Arith {
  bool fmod;
  T operator()(T x, T y) const {
    if constexpr (kOp == Bin::kAdd) {
      return WrapAdd(x, y);
    } else if constexpr (kOp == Bin::kSub) {
      return WrapSub(x, y);
    } else if constexpr (kOp == Bin::kMul) {
      return WrapMul(x, y);
    } else if constexpr (kOp == Bin::kDiv) {
      if constexpr (std::is_integral_v<T>) {
        if (y == 0) return 0;
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(x));
        }
        return static_cast<T>(x / y);
      } else {
        return x / y;
      }
    } else if constexpr (kOp == Bin::kMax) {
      if constexpr (std::is_floating_point_v<T>) { if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN(); }
      return x > y ? x : y;
    } else if constexpr (kOp == Bin::kMin) {
      if constexpr (std::is_floating_point_v<T>) { if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN(); }
      return x < y ? x : y;
    } else if constexpr (kOp == Bin::kPRelu) {
      return x < T(0) ? static_cast<T>(x * y) : x;
    } else if constexpr (kOp == Bin::kMod) {
      if constexpr (std::is_integral_v<T>) {
        if (y == 0) return 0;
        if constexpr (std::is_signed_v<T>) {
          if (y == -1) return 0;
          T r = static_cast<T>(x % y);
          // fmod=0 follows Python: the result takes the divisor's sign.
          if (!fmod && r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
          return r;
        } else {
          return static_cast<T>(x % y);
        }
      } else {
        T r = std::fmod(x, y);
        if (!fmod && r != 0 && ((r < 0) != (y < 0))) r += y;
        return r;
      }
    }
  }
};

// float16/bfloat16 storage: the float op on the widened operands, rounded back to
// nearest even, as the fused programs compute them.
template <Bin kOp, bool kBF16>
struct Arith16 {
  Arith<kOp, float> op;
  uint16_t operator()(uint16_t x, uint16_t y) const {
    if constexpr (kBF16) return FloatToBF16(op(BF16ToFloat(x), BF16ToFloat(y)));
    else return FloatToHalf(op(HalfToFloat(x), HalfToFloat(y)));
  }
};

template <Bin kOp, typename T>
struct Compare {
  uint8_t operator()(T x, T y) const {
    if constexpr (kOp == Bin::kEqual) return x == y;
    else if constexpr (kOp == Bin::kLess) return x < y;
    else if constexpr (kOp == Bin::kGreater) return x > y;
    else if constexpr (kOp == Bin::kLessOrEqual) return x <= y;
    else return x >= y;
  }
};

template <Bin kOp>
struct Logic {
  uint8_t operator()(uint8_t x, uint8_t y) const {
    const bool a = x != 0, b = y != 0;
    if constexpr (kOp == Bin::kAnd) return a && b;
    else if constexpr (kOp == Bin::kOr) return a || b;
    else return a != b;
  }
};

Status CheckBroadcast(const TensorRef& a, const TensorRef& b, const TensorRef& out,
                      std::string_view op) {
  int64_t s[kMaxRank];
  if (out.rank > kMaxRank || !BroadcastStrides(a, out, s) || !BroadcastStrides(b, out, s)) {
    return OpError(op, "inputs " + ShapeStr(a) + " and " + ShapeStr(b) +
                           " do not broadcast to output " + ShapeStr(out));
  }
  return Status::Ok();
}

// out = op(a, b) with out possibly aliasing a (the variadic fold relies on that).
template <Bin kOp>
Status ApplyBinary(const TensorRef& a, const TensorRef& b, const TensorRef& out,
                   const AttrMap& attrs) {
  constexpr std::string_view kName = BinName(kOp);
  KILN_RETURN_IF_ERROR(CheckBroadcast(a, b, out, kName));
  if (a.dtype != b.dtype) {
    return OpError(kName, "input dtypes differ: " + DTypeStr(a.dtype) + " vs " +
                              DTypeStr(b.dtype));
  }
  if constexpr (IsLogic(kOp)) {
    if (a.dtype != DType::kBool || out.dtype != DType::kBool) {
      return OpError(kName, "expected bool inputs and output, got " + DTypeStr(a.dtype));
    }
    Broadcast2<uint8_t, uint8_t, uint8_t>(a, b, out, Logic<kOp>{});
    return Status::Ok();
  } else if constexpr (IsCompare(kOp)) {
    if (out.dtype != DType::kBool) {
      return OpError(kName, "expected a bool output, got " + DTypeStr(out.dtype));
    }
    if (a.dtype == DType::kBool && kOp == Bin::kEqual) {
      Broadcast2<uint8_t, uint8_t, uint8_t>(a, b, out, Compare<kOp, uint8_t>{});
      return Status::Ok();
    }
    bool ok = VisitNumeric(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      Broadcast2<T, T, uint8_t>(a, b, out, Compare<kOp, T>{});
    });
    if (!ok) return OpError(kName, "unsupported input dtype " + DTypeStr(a.dtype));
    return Status::Ok();
  } else {
    if (out.dtype != a.dtype) {
      return OpError(kName, "output dtype " + DTypeStr(out.dtype) + " differs from input dtype " +
                                DTypeStr(a.dtype));
    }
    const bool fmod = attrs.GetInt("fmod", 0) != 0;
    if (a.dtype == DType::kFloat16) {
      Broadcast2<uint16_t, uint16_t, uint16_t>(a, b, out, Arith16<kOp, false>{{fmod}});
      return Status::Ok();
    }
    if (a.dtype == DType::kBFloat16) {
      Broadcast2<uint16_t, uint16_t, uint16_t>(a, b, out, Arith16<kOp, true>{{fmod}});
      return Status::Ok();
    }
    bool ok = VisitNumeric(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      Broadcast2<T, T, T>(a, b, out, Arith<kOp, T>{fmod});
    });
    if (!ok) return OpError(kName, "unsupported input dtype " + DTypeStr(a.dtype));
    return Status::Ok();
  }
}

template <Bin kOp>
Status BinaryKernel(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, BinName(kOp), 2));
  return ApplyBinary<kOp>(call.inputs[0], call.inputs[1], call.outputs[0], call.attrs);
}

// Variadic Max/Min/Sum folds pairwise into the output, which already has the final
// broadcast shape; each step reads only the output element it writes.
template <Bin kOp>
Status VariadicKernel(const KernelCall& call, std::string_view name, bool mean) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef& out = call.outputs[0];
  const size_t n = call.inputs.size();
  for (size_t i = 0; i < n; ++i) {
    if (!call.inputs[i].present()) return OpError(name, "input " + std::to_string(i) + " is absent");
  }
  if (n == 1) {
    const TensorRef& a = call.inputs[0];
    KILN_RETURN_IF_ERROR(CheckSameCount(a, out, name));
    if (a.dtype != out.dtype) return OpError(name, "output dtype differs from input dtype");
    if (out.data != a.data && out.num_elements > 0) {
      std::memmove(out.data, a.data, out.num_elements * DTypeSize(a.dtype));
    }
    return Status::Ok();
  }
  KILN_RETURN_IF_ERROR(ApplyBinary<kOp>(call.inputs[0], call.inputs[1], out, call.attrs));
  for (size_t i = 2; i < n; ++i) {
    KILN_RETURN_IF_ERROR(ApplyBinary<kOp>(out, call.inputs[i], out, call.attrs));
  }
  if (mean) {
    bool ok = VisitNumeric(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = out.as<T>();
      for (int64_t i = 0; i < out.num_elements; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(n));
    });
    if (!ok) return OpError(name, "unsupported dtype " + DTypeStr(out.dtype));
  }
  return Status::Ok();
}

Status MaxKernel(const KernelCall& c) { return VariadicKernel<Bin::kMax>(c, "Max", false); }
Status MinKernel(const KernelCall& c) { return VariadicKernel<Bin::kMin>(c, "Min", false); }
Status SumKernel(const KernelCall& c) { return VariadicKernel<Bin::kAdd>(c, "Sum", false); }
Status MeanKernel(const KernelCall& c) { return VariadicKernel<Bin::kAdd>(c, "Mean", true); }

// Pow allows a different exponent dtype (e.g. float base, int64 exponent).
// x ^ y for a base of type T: float in float, the others in double.
template <typename T>
T PowOf(T x, double y) {
  if constexpr (std::is_same_v<T, float>) return std::pow(x, static_cast<float>(y));
  else return FromDouble<T>(std::pow(static_cast<double>(x), y));
}

// Base and exponent of one dtype, the common case, with its fast paths (x^2, x^1).
template <typename T>
void PowTyped(const TensorRef& a, const TensorRef& b, const TensorRef& out) {
  if (b.num_elements == 1) {
    const double e = static_cast<double>(b.as<const T>()[0]);
    const T* pa = a.as<const T>();
    T* po = out.as<T>();
    if (e == 2.0) {
      for (int64_t i = 0; i < out.num_elements; ++i) po[i] = static_cast<T>(pa[i] * pa[i]);
      return;
    }
    if (e == 1.0 && a.num_elements == out.num_elements) {
      for (int64_t i = 0; i < out.num_elements; ++i) po[i] = pa[i];
      return;
    }
  }
  Broadcast2<T, T, T>(a, b, out, [](T x, T y) -> T { return PowOf<T>(x, static_cast<double>(y)); });
}

// An exponent of another dtype (an integer power of a float, ...): read as a double per element,
// one loop per base type rather than one per pair of dtypes.
template <typename T>
void PowMixed(const TensorRef& a, const TensorRef& b, const TensorRef& out) {
  const int r = out.rank;
  const T* pa = a.as<const T>();
  T* po = out.as<T>();
  if (out.num_elements == 0) return;
  if (r == 0) {
    po[0] = PowOf<T>(pa[0], NumberAt(b, 0));
    return;
  }
  int64_t sa[kMaxRank] = {}, sb[kMaxRank] = {};
  BroadcastStrides(a, out, sa);
  BroadcastStrides(b, out, sb);
  const int64_t inner = out.dims[r - 1];
  NdIndex it(out.dims, r);
  int64_t o = 0;
  do {
    const int64_t oa = it.Offset(sa, r - 1), ob = it.Offset(sb, r - 1);
    for (int64_t j = 0; j < inner; ++j) po[o + j] = PowOf<T>(pa[oa + j * sa[r - 1]], NumberAt(b, ob + j * sb[r - 1]));
    o += inner;
  } while (it.Next(r - 1));
}

Status PowKernel(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "Pow", 2));
  const TensorRef &a = call.inputs[0], &b = call.inputs[1], &out = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckBroadcast(a, b, out, "Pow"));
  if (out.dtype != a.dtype) return OpError("Pow", "output dtype differs from base dtype");
  bool supported = false;
  auto visit_exp = [&](auto base_tag) {
    using T = decltype(base_tag);
    switch (b.dtype) {
      case DType::kFloat32:
      case DType::kFloat64:
      case DType::kInt32:
      case DType::kInt64:
      case DType::kUInt32:
      case DType::kUInt64:
        if (b.dtype == a.dtype) PowTyped<T>(a, b, out);
        else PowMixed<T>(a, b, out);
        supported = true;
        break;
      default: break;
    }
  };
  switch (a.dtype) {
    case DType::kFloat32: visit_exp(float{}); break;
    case DType::kFloat64: visit_exp(double{}); break;
    case DType::kInt32: visit_exp(int32_t{}); break;
    case DType::kInt64: visit_exp(int64_t{}); break;
    default: break;
  }
  if (!supported) {
    return OpError("Pow", "unsupported dtypes " + DTypeStr(a.dtype) + " ^ " + DTypeStr(b.dtype));
  }
  return Status::Ok();
}

template <typename U>
void WhereTyped(const TensorRef& c, const TensorRef& x, const TensorRef& y, const TensorRef& out) {
  const uint8_t* pc = c.as<const uint8_t>();
  const U* px = x.as<const U>();
  const U* py = y.as<const U>();
  U* po = out.as<U>();
  const int64_t n = out.num_elements;
  if (n == 0) return;
  if (c.num_elements == n && x.num_elements == n && y.num_elements == n) {
    for (int64_t i = 0; i < n; ++i) po[i] = pc[i] ? px[i] : py[i];
    return;
  }
  const int r = out.rank;
  int64_t sc[kMaxRank] = {}, sx[kMaxRank] = {}, sy[kMaxRank] = {};
  BroadcastStrides(c, out, sc);
  BroadcastStrides(x, out, sx);
  BroadcastStrides(y, out, sy);
  if (r == 0) {
    po[0] = pc[0] ? px[0] : py[0];
    return;
  }
  const int64_t inner = out.dims[r - 1];
  const int64_t ic = sc[r - 1], ix = sx[r - 1], iy = sy[r - 1];
  NdIndex it(out.dims, r);
  int64_t o = 0;
  do {
    const uint8_t* rc = pc + it.Offset(sc, r - 1);
    const U* rx = px + it.Offset(sx, r - 1);
    const U* ry = py + it.Offset(sy, r - 1);
    for (int64_t j = 0; j < inner; ++j) po[o + j] = rc[j * ic] ? rx[j * ix] : ry[j * iy];
    o += inner;
  } while (it.Next(r - 1));
}

Status WhereKernel(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "Where", 3));
  const TensorRef &c = call.inputs[0], &x = call.inputs[1], &y = call.inputs[2];
  const TensorRef& out = call.outputs[0];
  if (c.dtype != DType::kBool) return OpError("Where", "condition must be bool, got " + DTypeStr(c.dtype));
  if (x.dtype != y.dtype || x.dtype != out.dtype) {
    return OpError("Where", "X, Y and output dtypes must match, got " + DTypeStr(x.dtype) + ", " +
                                DTypeStr(y.dtype) + ", " + DTypeStr(out.dtype));
  }
  int64_t s[kMaxRank];
  if (out.rank > kMaxRank || !BroadcastStrides(c, out, s) || !BroadcastStrides(x, out, s) ||
      !BroadcastStrides(y, out, s)) {
    return OpError("Where", "inputs " + ShapeStr(c) + ", " + ShapeStr(x) + ", " + ShapeStr(y) +
                                " do not broadcast to output " + ShapeStr(out));
  }
  if (!VisitBySize(DTypeSize(x.dtype), [&](auto tag) { WhereTyped<decltype(tag)>(c, x, y, out); })) {
    return OpError("Where", "unsupported dtype " + DTypeStr(x.dtype));
  }
  return Status::Ok();
}

// halves: the binary arithmetic rounds each result once itself (Arith16), Max and Min are
// exact in any type, Where moves elements by size; comparisons, Pow, and Sum and Mean (whose
// pairwise fold would round every partial sum) run widened to float32 (runtime/kernels/widen.h).
constexpr KernelDef kKernels[] = {
    {"Add", BinaryKernel<Bin::kAdd>, nullptr, true},
    {"And", BinaryKernel<Bin::kAnd>, nullptr},
    {"Div", BinaryKernel<Bin::kDiv>, nullptr, true},
    {"Equal", BinaryKernel<Bin::kEqual>, nullptr},
    {"Greater", BinaryKernel<Bin::kGreater>, nullptr},
    {"GreaterOrEqual", BinaryKernel<Bin::kGreaterOrEqual>, nullptr},
    {"Less", BinaryKernel<Bin::kLess>, nullptr},
    {"LessOrEqual", BinaryKernel<Bin::kLessOrEqual>, nullptr},
    {"Max", MaxKernel, nullptr, true},
    {"Mean", MeanKernel, nullptr},
    {"Min", MinKernel, nullptr, true},
    {"Mod", BinaryKernel<Bin::kMod>, nullptr, true},
    {"Mul", BinaryKernel<Bin::kMul>, nullptr, true},
    {"Or", BinaryKernel<Bin::kOr>, nullptr},
    {"PRelu", BinaryKernel<Bin::kPRelu>, nullptr, true},
    {"Pow", PowKernel, nullptr},
    {"Sub", BinaryKernel<Bin::kSub>, nullptr, true},
    {"Sum", SumKernel, nullptr},
    {"Where", WhereKernel, nullptr, true},
    {"Xor", BinaryKernel<Bin::kXor>, nullptr},
};

}  // namespace

std::span<const KernelDef> ElementwiseKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
