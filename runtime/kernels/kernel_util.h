// Small helpers shared by the CPU kernel families: shape arithmetic, broadcasting,
// dtype dispatch and error messages. Everything here is allocation-free except the
// error paths, which build a message string.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <string_view>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/kernels/kernel.h"
#include "runtime/shape_text.h"

namespace kiln::cpu {

// A kernel operand's shape as text (runtime/shape_text.h): "[2, 3]".
inline std::string ShapeStr(const int64_t* dims, int rank) {
  return ShapeText(std::span<const int64_t>(dims, static_cast<size_t>(rank)));
}
inline std::string ShapeStr(const TensorRef& t) {
  return t.present() ? ShapeStr(t.dims, t.rank) : std::string("<absent>");
}
inline std::string DTypeStr(DType dt) { return std::string(DTypeName(dt)); }

inline Status OpError(std::string_view op, const std::string& msg) {
  return InvalidArgument(std::string(op) + ": " + msg);
}
// A data-dependent output size `found` as a run-time dim (KernelCall::runtime_size): stored
// when the outputs have room for it (`fits`), else kInternal (the compiler's bound did not
// hold), before the kernel writes anything.
inline Status ReportRuntimeSize(const KernelCall& call, std::string_view op, int64_t found, bool fits) {
  if (!fits)
    return Internal(std::string(op) + ": its data-dependent size is " + std::to_string(found) +
                    ", and its outputs, sized for the run-time dim's bound, have no room for it");
  *call.runtime_size = found;
  return Status::Ok();
}

inline Status OpUnimplemented(std::string_view op, const std::string& msg) {
  return Unimplemented(std::string(op) + ": " + msg);
}

// Max, min and clamp that pass a NaN in `x` on, as onnxruntime and NumPy do; std::max and
// std::min would return the other operand and hide the NaN.
template <typename T>
inline bool IsNaN(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}
template <typename T>
inline T MaxNaN(T x, T bound) { return x < bound ? bound : x; }
// Whether v replaces the running maximum `best` of a scan that keeps the first maximum: greater,
// or the scan's first NaN, which then stays (no comparison with a NaN `best` is true, and a
// later NaN does not replace it): MaxPool, GlobalMaxPool, Hardmax (docs/semantics.md).
template <typename T>
inline bool BeatsMax(T v, T best) {
  return v > best || (v != v && best == best);
}
template <typename T>
inline T MinNaN(T x, T bound) { return x > bound ? bound : x; }
template <typename T>
inline T ClampNaN(T x, T lo, T hi) { return MinNaN(MaxNaN(x, lo), hi); }

// Integer +, - and * wrapping modulo 2^bits, as ONNX runtimes compute them: signed overflow
// is undefined behavior in C++, and so is overflow of an unsigned type narrower than int (it
// is promoted to int first), hence the arithmetic in unsigned int or wider. Floats: plain.
template <typename T>
using WrapUnsigned = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
template <typename T>
inline T WrapAdd(T x, T y) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(x) + static_cast<WrapUnsigned<T>>(y));
  else return x + y;
}
template <typename T>
inline T WrapSub(T x, T y) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(x) - static_cast<WrapUnsigned<T>>(y));
  else return x - y;
}
template <typename T>
inline T WrapMul(T x, T y) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(x) * static_cast<WrapUnsigned<T>>(y));
  else return x * y;
}

// A double result stored as element type T. Floating T: the usual rounding. Integer T:
// truncated toward zero and saturated at T's range, NaN giving 0 (the rule of Cast and of
// fused programs, runtime/fused/program.h): a C++ conversion of NaN, an infinity or an
// out-of-range value to an integer is undefined behavior, and kernels computing in double
// (Pow on integers, integer ReduceMean/L2/LogSum) can produce all three.
template <typename T>
inline T FromDouble(double d) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(d);
  } else if constexpr (std::is_same_v<T, bool>) {
    return d != 0;
  } else {
    if (d != d) return 0;
    // 2^bits (unsigned) or 2^(bits-1) (signed), exact in a double; T's max is one below.
    constexpr double kLimit = std::is_signed_v<T> ? -static_cast<double>(std::numeric_limits<T>::min())
                                                  : 2.0 * static_cast<double>(std::numeric_limits<T>::max() / 2 + 1);
    if (d >= kLimit) return std::numeric_limits<T>::max();
    if (d <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    return static_cast<T>(d);
  }
}

// A coordinate computed from data (grid points, regions, scales), already floored, ceiled or
// rounded, as an index: clamped to [-2^62, 2^62] and NaN giving 0, so NaN, infinities and 1e30
// convert without undefined behavior and a few taps can be added or subtracted after. Callers
// clamp or range-check the result against the real extent as before.
inline int64_t ToIndex(double x) {
  constexpr double kLimit = 4611686018427387904.0;  // 2^62
  if (!(x == x)) return 0;
  return static_cast<int64_t>(x < -kLimit ? -kLimit : (x > kLimit ? kLimit : x));
}

// Element i of an ints attribute, or `def` when the attribute is absent or too short (a
// hostile artifact may give any length; reading past it would be out of bounds).
inline int64_t IntsAt(const AttrMap& attrs, std::string_view name, size_t i, int64_t def) {
  const std::vector<int64_t>& v = attrs.GetInts(name);
  return i < v.size() ? v[i] : def;
}

inline int64_t Product(const int64_t* dims, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// Product of dims computed from attributes or data (not a real tensor's shape, which load
// has checked): false when a dim is negative or the product overflows int64.
inline bool CheckedProduct(const int64_t* dims, int begin, int end, int64_t* out) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i)
    if (dims[i] < 0 || __builtin_mul_overflow(p, dims[i], &p)) return false;
  *out = p;
  return true;
}

// Maps an ONNX axis in [-rank, rank) to [0, rank); false when out of range.
inline bool NormalizeAxis(int64_t axis, int rank, int* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = static_cast<int>(axis < 0 ? axis + rank : axis);
  return true;
}

inline void ContiguousStrides(const int64_t* dims, int rank, int64_t* strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
}

// Element strides of `in` read as if broadcast (numpy, right-aligned) to `out_dims`:
// broadcast dims get stride 0. False when `in` does not broadcast to `out_dims`.
inline bool BroadcastStrides(const int64_t* in_dims, int in_rank, const int64_t* out_dims,
                             int out_rank, int64_t* strides) {
  if (in_rank > out_rank) return false;
  int64_t s = 1;
  for (int i = out_rank - 1; i >= 0; --i) {
    int j = i - (out_rank - in_rank);
    if (j < 0) {
      strides[i] = 0;
      continue;
    }
    int64_t d = in_dims[j];
    if (d == out_dims[i]) {
      strides[i] = d == 1 ? 0 : s;
    } else if (d == 1) {
      strides[i] = 0;
    } else {
      return false;
    }
    s *= d;
  }
  return true;
}
inline bool BroadcastStrides(const TensorRef& in, const TensorRef& out, int64_t* strides) {
  return BroadcastStrides(in.dims, in.rank, out.dims, out.rank, strides);
}

// Odometer over an N-D index space; `Next` steps the last axis fastest.
struct NdIndex {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t idx[kMaxRank] = {};
  NdIndex(const int64_t* d, int r) : rank(r) {
    for (int i = 0; i < r; ++i) dims[i] = d[i];
  }
  // Advances axes [0, upto) only, so callers can run the innermost axes themselves.
  bool Next(int upto) {
    for (int i = upto - 1; i >= 0; --i) {
      if (++idx[i] < dims[i]) return true;
      idx[i] = 0;
    }
    return false;
  }
  int64_t Offset(const int64_t* strides, int upto) const {
    int64_t o = 0;
    for (int i = 0; i < upto; ++i) o += idx[i] * strides[i];
    return o;
  }
};

// Spatial axes of an [N, C, spatial...] tensor.
constexpr int kMaxSpatial = kMaxRank - 2;

// A window sliding over the spatial axes (Conv, ConvTranspose, pooling): per axis the
// kernel extent, stride, dilation and pads, and the input and output extents.
struct WindowGeometry {
  int sr = 0;  // spatial rank
  int64_t kernel[kMaxSpatial] = {};
  int64_t stride[kMaxSpatial] = {};
  int64_t dilation[kMaxSpatial] = {};
  int64_t pad_begin[kMaxSpatial] = {};
  int64_t pad_end[kMaxSpatial] = {};
  int64_t in[kMaxSpatial] = {};
  int64_t out[kMaxSpatial] = {};
  int64_t in_size = 1, out_size = 1;
};

inline bool IsIndexType(DType dt) { return dt == DType::kInt64 || dt == DType::kInt32; }

// Element i of an int32/int64 tensor (callers check IsIndexType first).
inline int64_t IndexAt(const TensorRef& t, int64_t i) {
  return t.dtype == DType::kInt64 ? t.as<const int64_t>()[i]
                                  : static_cast<int64_t>(t.as<const int32_t>()[i]);
}

// Calls f(T{}) with the C++ type of a numeric dtype. False for other dtypes.
template <typename F>
bool VisitNumeric(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32: f(float{}); return true;
    case DType::kFloat64: f(double{}); return true;
    case DType::kInt32: f(int32_t{}); return true;
    case DType::kInt64: f(int64_t{}); return true;
    case DType::kInt8: f(int8_t{}); return true;
    case DType::kUInt8: f(uint8_t{}); return true;
    case DType::kInt16: f(int16_t{}); return true;
    case DType::kUInt16: f(uint16_t{}); return true;
    case DType::kUInt32: f(uint32_t{}); return true;
    case DType::kUInt64: f(uint64_t{}); return true;
    default: return false;
  }
}

template <typename F>
bool VisitFloat(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32: f(float{}); return true;
    case DType::kFloat64: f(double{}); return true;
    default: return false;
  }
}

// Element i of any numeric or bool tensor, widened to double (scalar inputs such as
// Clip bounds, Pow exponents, Range endpoints).
inline double NumberAt(const TensorRef& t, int64_t i) {
  double v = 0;
  if (t.dtype == DType::kBool) return t.as<const uint8_t>()[i] ? 1.0 : 0.0;
  VisitNumeric(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    v = static_cast<double>(t.as<const T>()[i]);
  });
  return v;
}

// Unsigned type of the same width, for dtype-agnostic data movement.
template <size_t kSize> struct UIntOfSize;
template <> struct UIntOfSize<1> { using type = uint8_t; };
template <> struct UIntOfSize<2> { using type = uint16_t; };
template <> struct UIntOfSize<4> { using type = uint32_t; };
template <> struct UIntOfSize<8> { using type = uint64_t; };

// Calls f(U{}) with an unsigned type as wide as one element; false for other sizes.
template <typename F>
bool VisitBySize(size_t size, F&& f) {
  switch (size) {
    case 1: f(uint8_t{}); return true;
    case 2: f(uint16_t{}); return true;
    case 4: f(uint32_t{}); return true;
    case 8: f(uint64_t{}); return true;
    default: return false;
  }
}

inline Status CheckWorkspace(const KernelCall& call, size_t need, std::string_view op) {
  if (need > 0 && (call.workspace == nullptr || call.workspace_bytes < need)) {
    return Internal(std::string(op) + ": workspace of " + std::to_string(call.workspace_bytes) +
                    " bytes given, " + std::to_string(need) + " needed");
  }
  return Status::Ok();
}

inline Status CheckArity(const KernelCall& call, std::string_view op, size_t min_inputs,
                         size_t min_outputs = 1) {
  if (call.inputs.size() < min_inputs || call.outputs.size() < min_outputs) {
    return OpError(op, "expected at least " + std::to_string(min_inputs) + " inputs and " +
                           std::to_string(min_outputs) + " outputs, got " +
                           std::to_string(call.inputs.size()) + " and " +
                           std::to_string(call.outputs.size()));
  }
  for (size_t i = 0; i < min_inputs; ++i) {
    if (!call.inputs[i].present()) {
      return OpError(op, "required input " + std::to_string(i) + " is absent");
    }
  }
  if (!call.outputs[0].present()) return OpError(op, "output 0 is absent");
  return Status::Ok();
}

// Optional input i: present only when the span is long enough and the tensor is there.
inline const TensorRef* OptionalInput(const KernelCall& call, size_t i) {
  return i < call.inputs.size() && call.inputs[i].present() ? &call.inputs[i] : nullptr;
}
inline const TensorRef* OptionalOutput(const KernelCall& call, size_t i) {
  return i < call.outputs.size() && call.outputs[i].present() ? &call.outputs[i] : nullptr;
}

inline Status CheckSameCount(const TensorRef& in, const TensorRef& out, std::string_view op) {
  if (in.num_elements != out.num_elements) {
    return OpError(op, "input " + ShapeStr(in) + " has " + std::to_string(in.num_elements) +
                           " elements but output " + ShapeStr(out) + " has " +
                           std::to_string(out.num_elements));
  }
  return Status::Ok();
}

}  // namespace kiln::cpu
