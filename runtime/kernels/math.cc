// Elementwise math beyond unary.cc and elementwise.cc: IsInf/IsNaN, Shrink, and the integer
// bit ops (BitwiseAnd/Or/Xor/Not, BitShift).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/half.h"

namespace kiln::cpu {
namespace {

Status CheckSameShape(const KernelCall& call, std::string_view name, DType out_dtype) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, name));
  if (y.dtype != out_dtype)
    return OpError(name, "expected a " + DTypeStr(out_dtype) + " output, got " + DTypeStr(y.dtype));
  return Status::Ok();
}

// Calls f(i, v) with element i of a float tensor (float16 and bfloat16 included) as double.
template <typename F>
bool ForEachFloat(const TensorRef& x, F f) {
  switch (x.dtype) {
    case DType::kFloat16:
      for (int64_t i = 0; i < x.num_elements; ++i) f(i, static_cast<double>(HalfToFloat(x.as<const uint16_t>()[i])));
      return true;
    case DType::kBFloat16:
      for (int64_t i = 0; i < x.num_elements; ++i) f(i, static_cast<double>(BF16ToFloat(x.as<const uint16_t>()[i])));
      return true;
    default:
      return VisitFloat(x.dtype, [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < x.num_elements; ++i) f(i, static_cast<double>(x.as<const T>()[i]));
      });
  }
}

Status IsInf(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckSameShape(call, "IsInf", DType::kBool));
  const bool neg = call.attrs.GetInt("detect_negative", 1) != 0;
  const bool pos = call.attrs.GetInt("detect_positive", 1) != 0;
  uint8_t* py = call.outputs[0].as<uint8_t>();
  if (!ForEachFloat(call.inputs[0], [&](int64_t i, double v) {
        py[i] = std::isinf(v) && (v > 0 ? pos : neg);
      }))
    return OpError("IsInf", "expected a float input, got " + DTypeStr(call.inputs[0].dtype));
  return Status::Ok();
}

Status IsNaN(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckSameShape(call, "IsNaN", DType::kBool));
  uint8_t* py = call.outputs[0].as<uint8_t>();
  if (!ForEachFloat(call.inputs[0], [&](int64_t i, double v) { py[i] = std::isnan(v); }))
    return OpError("IsNaN", "expected a float input, got " + DTypeStr(call.inputs[0].dtype));
  return Status::Ok();
}

// Shrink: x - bias above lambd, x + bias below -lambd, else 0; integer inputs too.
Status Shrink(const KernelCall& call) {
  const TensorRef* x0 = call.inputs.empty() ? nullptr : &call.inputs[0];
  KILN_RETURN_IF_ERROR(CheckSameShape(call, "Shrink", x0 ? x0->dtype : DType::kUndefined));
  const double bias = call.attrs.GetFloat("bias", 0.0f), lambd = call.attrs.GetFloat("lambd", 0.5f);
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  bool ok = VisitNumeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    for (int64_t i = 0; i < x.num_elements; ++i) {
      const double v = static_cast<double>(px[i]);
      py[i] = v < -lambd ? static_cast<T>(v + bias) : v > lambd ? static_cast<T>(v - bias) : T(0);
    }
  });
  if (!ok) return OpError("Shrink", "unsupported input dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

// Calls f(U{}) with the C++ type of an integer dtype.
template <typename F>
bool VisitInteger(DType dt, F&& f) {
  switch (dt) {
    case DType::kInt8: f(int8_t{}); return true;
    case DType::kInt16: f(int16_t{}); return true;
    case DType::kInt32: f(int32_t{}); return true;
    case DType::kInt64: f(int64_t{}); return true;
    case DType::kUInt8: f(uint8_t{}); return true;
    case DType::kUInt16: f(uint16_t{}); return true;
    case DType::kUInt32: f(uint32_t{}); return true;
    case DType::kUInt64: f(uint64_t{}); return true;
    default: return false;
  }
}

// out = op(a, b) over integers of one dtype, numpy-broadcast.
template <typename Op>
Status IntBinary(const KernelCall& call, std::string_view name, bool unsigned_only, Op op) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 2));
  const TensorRef &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  if (a.dtype != b.dtype || y.dtype != a.dtype)
    return OpError(name, "expected inputs and output of one dtype, got " + DTypeStr(a.dtype) + ", " +
                             DTypeStr(b.dtype) + " -> " + DTypeStr(y.dtype));
  int64_t sa[kMaxRank] = {}, sb[kMaxRank] = {};
  if (y.rank > kMaxRank || !BroadcastStrides(a, y, sa) || !BroadcastStrides(b, y, sb))
    return OpError(name, "inputs " + ShapeStr(a) + " and " + ShapeStr(b) + " do not broadcast to output " + ShapeStr(y));
  bool ok = VisitInteger(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (unsigned_only && std::is_signed_v<T>) return;
    const T* pa = a.as<const T>();
    const T* pb = b.as<const T>();
    T* py = y.as<T>();
    if (y.num_elements == 0) return;
    NdIndex it(y.dims, y.rank);
    int64_t o = 0;
    do {
      py[o++] = op(pa[it.Offset(sa, y.rank)], pb[it.Offset(sb, y.rank)]);
    } while (it.Next(y.rank));
  });
  if (!ok || (unsigned_only && a.dtype != DType::kUInt8 && a.dtype != DType::kUInt16 &&
              a.dtype != DType::kUInt32 && a.dtype != DType::kUInt64))
    return OpError(name, std::string("expected ") + (unsigned_only ? "unsigned " : "") + "integer inputs, got " +
                             DTypeStr(a.dtype));
  return Status::Ok();
}

Status BitwiseAnd(const KernelCall& c) { return IntBinary(c, "BitwiseAnd", false, [](auto x, auto y) { return decltype(x)(x & y); }); }
Status BitwiseOr(const KernelCall& c) { return IntBinary(c, "BitwiseOr", false, [](auto x, auto y) { return decltype(x)(x | y); }); }
Status BitwiseXor(const KernelCall& c) { return IntBinary(c, "BitwiseXor", false, [](auto x, auto y) { return decltype(x)(x ^ y); }); }

// Shifts by the bit width or more give 0 (C++ leaves them undefined).
Status BitShift(const KernelCall& c) {
  const std::string_view dir = c.attrs.GetString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return OpError("BitShift", "attribute direction must be \"LEFT\" or \"RIGHT\", got \"" + std::string(dir) + "\"");
  const bool left = dir == "LEFT";
  return IntBinary(c, "BitShift", true, [left](auto x, auto s) {
    using T = decltype(x);
    if (static_cast<uint64_t>(s) >= sizeof(T) * 8) return T(0);  // unsigned dtypes only run here
    return left ? T(x << s) : T(x >> s);
  });
}

Status BitwiseNot(const KernelCall& call) {
  const TensorRef* x0 = call.inputs.empty() ? nullptr : &call.inputs[0];
  KILN_RETURN_IF_ERROR(CheckSameShape(call, "BitwiseNot", x0 ? x0->dtype : DType::kUndefined));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (!VisitInteger(x.dtype, [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < x.num_elements; ++i) y.as<T>()[i] = static_cast<T>(~x.as<const T>()[i]);
      }))
    return OpError("BitwiseNot", "expected an integer input, got " + DTypeStr(x.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"BitShift", BitShift, nullptr},
    {"BitwiseAnd", BitwiseAnd, nullptr},
    {"BitwiseNot", BitwiseNot, nullptr},
    {"BitwiseOr", BitwiseOr, nullptr},
    {"BitwiseXor", BitwiseXor, nullptr},
    {"IsInf", IsInf, nullptr, true},
    {"IsNaN", IsNaN, nullptr, true},
    {"Shrink", Shrink, nullptr},
};

}  // namespace

std::span<const KernelDef> MathKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
