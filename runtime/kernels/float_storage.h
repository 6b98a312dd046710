// Element access for kernels that compute in double over float32/float64/float16/bfloat16
// storage: one load and one store per element, rounding to the storage type on store.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"
#include "runtime/kernels/kernel.h"
#include "runtime/half.h"

namespace kiln::cpu {

inline bool IsFloatStorage(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kFloat16 || dt == DType::kBFloat16;
}

// Element i of a tensor whose dtype passed IsFloatStorage.
inline double LoadFloat(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case DType::kFloat16: return HalfToFloat(t.as<const uint16_t>()[i]);
    case DType::kBFloat16: return BF16ToFloat(t.as<const uint16_t>()[i]);
    case DType::kFloat64: return t.as<const double>()[i];
    default: return t.as<const float>()[i];
  }
}

// v as a tensor of `dt` (which passed IsFloatStorage) stores it and LoadFloat reads it back:
// rounded to float32, float16 or bfloat16 (to nearest even); float64 keeps it.
inline double RoundToStorage(DType dt, double v) {
  switch (dt) {
    case DType::kFloat16: return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case DType::kBFloat16: return BF16ToFloat(FloatToBF16(static_cast<float>(v)));
    case DType::kFloat64: return v;
    default: return static_cast<float>(v);
  }
}

inline void StoreFloat(const TensorRef& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::kFloat16: t.as<uint16_t>()[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBFloat16: t.as<uint16_t>()[i] = FloatToBF16(static_cast<float>(v)); break;
    case DType::kFloat64: t.as<double>()[i] = v; break;
    default: t.as<float>()[i] = static_cast<float>(v); break;
  }
}

}  // namespace kiln::cpu
