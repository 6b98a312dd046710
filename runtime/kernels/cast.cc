// Cast and CastLike among float32/64, float16, bfloat16, the integer types and bool.
// Both take the target dtype from the output tensor, which the compiler has already
// resolved from `to` (Cast) or from the second input (CastLike).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/kernels/families.h"
#include "runtime/half.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

// A source element widened without loss: floats to double, integers to int64/uint64.
struct Value {
  bool is_float;
  bool is_unsigned;
  double f;
  int64_t i;
  uint64_t u;
};

Value Load(DType dt, const void* base, int64_t idx) {
  Value v{false, false, 0.0, 0, 0};
  auto as_int = [&](int64_t x) { v.i = x; v.u = static_cast<uint64_t>(x); };
  switch (dt) {
    case DType::kFloat32: v.is_float = true; v.f = static_cast<const float*>(base)[idx]; break;
    case DType::kFloat64: v.is_float = true; v.f = static_cast<const double*>(base)[idx]; break;
    case DType::kFloat16: v.is_float = true; v.f = HalfToFloat(static_cast<const uint16_t*>(base)[idx]); break;
    case DType::kBFloat16: v.is_float = true; v.f = BF16ToFloat(static_cast<const uint16_t*>(base)[idx]); break;
    case DType::kInt8: as_int(static_cast<const int8_t*>(base)[idx]); break;
    case DType::kUInt8: as_int(static_cast<const uint8_t*>(base)[idx]); break;
    case DType::kInt16: as_int(static_cast<const int16_t*>(base)[idx]); break;
    case DType::kUInt16: as_int(static_cast<const uint16_t*>(base)[idx]); break;
    case DType::kInt32: as_int(static_cast<const int32_t*>(base)[idx]); break;
    case DType::kUInt32: as_int(static_cast<const uint32_t*>(base)[idx]); break;
    case DType::kInt64: as_int(static_cast<const int64_t*>(base)[idx]); break;
    case DType::kUInt64:
      v.is_unsigned = true;
      v.u = static_cast<const uint64_t*>(base)[idx];
      v.i = static_cast<int64_t>(v.u);
      break;
    case DType::kBool: as_int(static_cast<const uint8_t*>(base)[idx] ? 1 : 0); break;
    default: break;
  }
  return v;
}

// Float to integer truncates toward zero; values outside int64 (and NaN) have no defined
// C++ conversion, so they saturate (NaN gives 0) instead of invoking undefined behavior.
int64_t TruncToInt64(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

// ONNX leaves float -> integer outside the target's range undefined; Kiln saturates at the
// target's range (NaN gives 0), the same rule as fused programs (runtime/fused/program.h)
// and the generated CUDA kernels, so fusing a Cast never changes a result.
template <typename T>
T ToInt(const Value& v) {
  if (v.is_float) {
    if constexpr (std::is_same_v<T, uint64_t>) {
      if (v.f >= 9.2233720368547758e18 && v.f < 1.8446744073709552e19) return static_cast<uint64_t>(v.f);
      if (v.f >= 1.8446744073709552e19) return std::numeric_limits<uint64_t>::max();
    }
    if constexpr (sizeof(T) < sizeof(int64_t)) {
      if (std::isnan(v.f)) return 0;
      if (v.f <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
      if (v.f >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    }
    if constexpr (std::is_unsigned_v<T>) {
      if (v.f <= 0) return 0;
    }
    return static_cast<T>(TruncToInt64(v.f));
  }
  return static_cast<T>(v.u);  // wraps modulo 2^bits like a C cast
}

double ToDouble(const Value& v) {
  if (v.is_float) return v.f;
  return v.is_unsigned ? static_cast<double>(v.u) : static_cast<double>(v.i);
}

bool Store(DType dt, void* base, int64_t idx, const Value& v) {
  switch (dt) {
    case DType::kFloat32:
      static_cast<float*>(base)[idx] = static_cast<float>(ToDouble(v));
      return true;
    case DType::kFloat64: static_cast<double*>(base)[idx] = ToDouble(v); return true;
    case DType::kFloat16:
      static_cast<uint16_t*>(base)[idx] = FloatToHalf(static_cast<float>(ToDouble(v)));
      return true;
    case DType::kBFloat16:
      static_cast<uint16_t*>(base)[idx] = FloatToBF16(static_cast<float>(ToDouble(v)));
      return true;
    case DType::kInt8: static_cast<int8_t*>(base)[idx] = ToInt<int8_t>(v); return true;
    case DType::kUInt8: static_cast<uint8_t*>(base)[idx] = ToInt<uint8_t>(v); return true;
    case DType::kInt16: static_cast<int16_t*>(base)[idx] = ToInt<int16_t>(v); return true;
    case DType::kUInt16: static_cast<uint16_t*>(base)[idx] = ToInt<uint16_t>(v); return true;
    case DType::kInt32: static_cast<int32_t*>(base)[idx] = ToInt<int32_t>(v); return true;
    case DType::kUInt32: static_cast<uint32_t*>(base)[idx] = ToInt<uint32_t>(v); return true;
    case DType::kInt64: static_cast<int64_t*>(base)[idx] = ToInt<int64_t>(v); return true;
    case DType::kUInt64: static_cast<uint64_t*>(base)[idx] = ToInt<uint64_t>(v); return true;
    case DType::kBool:
      static_cast<uint8_t*>(base)[idx] = v.is_float ? (v.f != 0.0) : (v.u != 0);
      return true;
    default: return false;
  }
}

bool Supported(DType dt) {
  switch (dt) {
    case DType::kFloat32: case DType::kFloat64: case DType::kFloat16: case DType::kBFloat16:
    case DType::kInt8: case DType::kUInt8: case DType::kInt16: case DType::kUInt16:
    case DType::kInt32: case DType::kUInt32: case DType::kInt64: case DType::kUInt64:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

template <typename S, typename D>
void CastFast(const TensorRef& x, const TensorRef& y) {
  const S* px = x.as<const S>();
  D* py = y.as<D>();
  for (int64_t i = 0; i < x.num_elements; ++i) py[i] = static_cast<D>(px[i]);
}

Status CastImpl(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, name));
  if (name == "Cast" && call.attrs.Has("to") &&
      call.attrs.GetInt("to", 0) != static_cast<int64_t>(y.dtype)) {
    return OpError(name, "attribute to=" + std::to_string(call.attrs.GetInt("to", 0)) +
                             " does not match output dtype " + DTypeStr(y.dtype));
  }
  if (!Supported(x.dtype) || !Supported(y.dtype)) {
    return OpUnimplemented(name, "cast from " + DTypeStr(x.dtype) + " to " + DTypeStr(y.dtype) +
                                     " is not supported");
  }
  if (x.dtype == y.dtype) {
    if (x.data != y.data && x.num_elements > 0) {
      std::memmove(y.data, x.data, x.num_elements * DTypeSize(x.dtype));
    }
    return Status::Ok();
  }
  // The common shape-arithmetic and input-preprocessing casts skip the generic path.
  using DT = DType;
  if (x.dtype == DT::kInt64 && y.dtype == DT::kFloat32) { CastFast<int64_t, float>(x, y); return Status::Ok(); }
  if (x.dtype == DT::kInt32 && y.dtype == DT::kFloat32) { CastFast<int32_t, float>(x, y); return Status::Ok(); }
  if (x.dtype == DT::kInt32 && y.dtype == DT::kInt64) { CastFast<int32_t, int64_t>(x, y); return Status::Ok(); }
  if (x.dtype == DT::kInt64 && y.dtype == DT::kInt32) { CastFast<int64_t, int32_t>(x, y); return Status::Ok(); }
  if (x.dtype == DT::kUInt8 && y.dtype == DT::kFloat32) { CastFast<uint8_t, float>(x, y); return Status::Ok(); }
  if (x.dtype == DT::kFloat32 && y.dtype == DT::kFloat64) { CastFast<float, double>(x, y); return Status::Ok(); }
  for (int64_t i = 0; i < x.num_elements; ++i) Store(y.dtype, y.data, i, Load(x.dtype, x.data, i));
  return Status::Ok();
}

Status Cast(const KernelCall& call) { return CastImpl(call, "Cast"); }
Status CastLike(const KernelCall& call) { return CastImpl(call, "CastLike"); }

constexpr KernelDef kKernels[] = {
    {"Cast", Cast, nullptr, true},
    {"CastLike", CastLike, nullptr, true},
};

}  // namespace

std::span<const KernelDef> CastKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
