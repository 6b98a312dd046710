// kiln/tensor.h: element types and non-owning tensor views.
//
//   float pixels[1 * 3 * 224 * 224];
//   kiln::TensorView x = kiln::TensorView::Host(pixels, kiln::DType::kFloat32, {1, 3, 224, 224});
//
// A TensorView never owns memory: the caller keeps `data` alive for as long as the view is
// used. Shapes are stored inline (at most kMaxRank dims), so building a view never allocates.
// Data is dense and row-major (C order), the layout of ONNX tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "kiln/export.h"

namespace kiln {

// Element types. The numeric values are those of ONNX's TensorProto.DataType, so artifacts
// and ONNX files name types the same way.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,  // one byte per element, 0 or 1
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

// Bytes per element; 0 for kUndefined or a value outside the enum.
KILN_API size_t DTypeSize(DType dtype);
// ONNX-style lower-case name ("float32", "int64", "bool"). Values outside the enum give
// "undefined(N)" for N in 0..24 and "undefined(?)" beyond (the view is static storage).
KILN_API std::string_view DTypeName(DType dtype);
// True for the values listed in DType other than kUndefined.
KILN_API bool IsValidDType(int32_t value);

// Where a tensor's bytes live.
enum class MemoryKind : int32_t {
  kHost = 0,    // ordinary CPU memory
  kDevice = 1,  // CUDA device memory (used by the CUDA backend)
};

inline constexpr int kMaxRank = 8;

// A non-owning view of a dense tensor: pointer, dtype, shape and memory kind.
struct KILN_API TensorView {
  void* data = nullptr;
  DType dtype = DType::kUndefined;
  int32_t rank = 0;  // 0 for a scalar
  int64_t dims[kMaxRank] = {};
  MemoryKind memory = MemoryKind::kHost;

  // A host tensor. Dims beyond kMaxRank are dropped and rank is set to kMaxRank + 1, which
  // every prologue rejects with a rank error.
  static TensorView Host(const void* data, DType dtype, std::initializer_list<int64_t> dims);
  static TensorView Host(const void* data, DType dtype, const int64_t* dims, int32_t rank);

  // Product of dims (1 for a scalar). Saturates at INT64_MAX instead of overflowing.
  int64_t num_elements() const;
  // num_elements() * DTypeSize(dtype), saturating.
  int64_t num_bytes() const;
};

}  // namespace kiln
