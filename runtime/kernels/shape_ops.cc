// Ops that produce tensors from shapes or scalars: Shape, Size, ConstantOfShape, Range.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/kernels/families.h"
#include "runtime/kernels/float_storage.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

Status ShapeKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Shape";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (y.dtype != DType::kInt64) return OpError(kName, "output must be int64, got " + DTypeStr(y.dtype));
  const int64_t r = x.rank;
  int64_t start = call.attrs.GetInt("start", 0);
  int64_t end = call.attrs.GetInt("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  const int64_t n = end > start ? end - start : 0;
  if (y.num_elements != n) {
    return OpError(kName, "output " + ShapeStr(y) + " should have " + std::to_string(n) + " elements");
  }
  for (int64_t i = 0; i < n; ++i) y.as<int64_t>()[i] = x.dims[start + i];
  return Status::Ok();
}

Status SizeKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Size";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef& y = call.outputs[0];
  if (y.dtype != DType::kInt64 || y.num_elements != 1) {
    return OpError(kName, "output must be an int64 scalar, got " + DTypeStr(y.dtype) + " " + ShapeStr(y));
  }
  y.as<int64_t>()[0] = call.inputs[0].num_elements;
  return Status::Ok();
}

// The compiler lowers ConstantOfShape's tensor `value` to the Kiln attrs value_float or
// value_int; the output dtype says how to store it.
Status ConstantOfShapeKernel(const KernelCall& call) {
  constexpr std::string_view kName = "ConstantOfShape";
  if (call.outputs.empty() || !call.outputs[0].present()) return OpError(kName, "output 0 is absent");
  const TensorRef& y = call.outputs[0];
  const bool has_float = call.attrs.Find("value_float") != nullptr;
  const double fv = call.attrs.GetFloat("value_float", 0.0f);
  const int64_t iv = call.attrs.GetInt("value_int", 0);
  const int64_t n = y.num_elements;
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    const T v = has_float ? static_cast<T>(fv) : static_cast<T>(iv);
    T* p = y.as<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  };
  if (y.dtype == DType::kBool) {
    std::memset(y.data, (has_float ? fv != 0.0 : iv != 0) ? 1 : 0, static_cast<size_t>(n));
    return Status::Ok();
  }
  if (!VisitNumeric(y.dtype, fill)) {
    return OpUnimplemented(kName, "output dtype " + DTypeStr(y.dtype) + " is not supported");
  }
  return Status::Ok();
}

// Range-27 over float16/bfloat16: start, limit and delta are widened to the stash_type (float32 or
// float64) and each element is start + i * delta in that precision, rounded to the storage type once;
// accumulating in float16 would stall once v + delta rounds back to v.
template <typename S>
Status RangeInStash(const KernelCall& call, std::string_view name) {
  const TensorRef& y = call.outputs[0];
  const S start = static_cast<S>(LoadFloat(call.inputs[0], 0));
  const S limit = static_cast<S>(LoadFloat(call.inputs[1], 0));
  const S delta = static_cast<S>(LoadFloat(call.inputs[2], 0));
  if (delta == S(0)) return OpError(name, "delta is 0");
  const double count =
      std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
  const int64_t n = count > 0 ? ToIndex(count) : 0;  // NaN or infinite counts convert without UB
  if (n != y.num_elements) {
    return OpError(name, "output has " + std::to_string(y.num_elements) + " elements, the range has " +
                             std::to_string(n));
  }
  for (int64_t i = 0; i < n; ++i) StoreFloat(y, i, static_cast<S>(start + static_cast<S>(i) * delta));
  return Status::Ok();
}

Status LowPrecisionRange(const KernelCall& call) {
  constexpr std::string_view kName = "Range";
  const int64_t stash = call.attrs.GetInt("stash_type", static_cast<int64_t>(DType::kFloat32));
  if (stash == static_cast<int64_t>(DType::kFloat32)) return RangeInStash<float>(call, kName);
  if (stash == static_cast<int64_t>(DType::kFloat64)) return RangeInStash<double>(call, kName);
  return OpError(kName, "stash_type must be 1 (float) or 11 (double), got " + std::to_string(stash));
}

Status RangeKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Range";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 3));
  const TensorRef& y = call.outputs[0];
  for (int i = 0; i < 3; ++i) {
    const TensorRef& t = call.inputs[i];
    if (t.num_elements != 1 || t.dtype != y.dtype) {
      return OpError(kName, "start, limit and delta must be scalars of the output dtype " +
                                DTypeStr(y.dtype) + ", input " + std::to_string(i) + " is " +
                                DTypeStr(t.dtype) + " " + ShapeStr(t));
    }
  }
  if (y.dtype == DType::kFloat16 || y.dtype == DType::kBFloat16) return LowPrecisionRange(call);
  Status status;
  bool ok = VisitNumeric(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T start = call.inputs[0].as<const T>()[0];
    const T limit = call.inputs[1].as<const T>()[0];
    const T delta = call.inputs[2].as<const T>()[0];
    if (delta == T(0)) {
      status = OpError(kName, "delta is 0");
      return;
    }
    const double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                                   static_cast<double>(delta));
    const int64_t n = count > 0 ? ToIndex(count) : 0;  // NaN or infinite counts convert without UB
    if (n != y.num_elements) {
      status = OpError(kName, "output has " + std::to_string(y.num_elements) + " elements, the range has " +
                                  std::to_string(n));
      return;
    }
    // Accumulating (rather than start + i * delta) matches onnxruntime bit for bit.
    T* p = y.as<T>();
    T v = start;
    for (int64_t i = 0; i < n; ++i) {
      p[i] = v;
      v = static_cast<T>(v + delta);
    }
  });
  if (!ok) return OpError(kName, "unsupported dtype " + DTypeStr(y.dtype));
  return status;
}

constexpr KernelDef kKernels[] = {
    {"ConstantOfShape", ConstantOfShapeKernel, nullptr},
    {"Range", RangeKernel, nullptr, true},
    {"Shape", ShapeKernel, nullptr, true},
    {"Size", SizeKernel, nullptr, true},
};

}  // namespace

std::span<const KernelDef> ShapeKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
