// runtime/shape_text.h: the one way Kiln writes a shape as text, "[1, 3, 224, 224]" ("[]" for
// a scalar), in error messages, logs, traces and the tools' reports. Header-only and standard
// library only, so that the runtime, the compiler and the tools all include it.
//
//   ShapeText(std::vector<int64_t>{1, 3, 224, 224})                  // "[1, 3, 224, 224]"
//   ShapeText(rank, [&](size_t i) { return dims[i].ToString(); })   // symbolic: "[N, 3, H*2]"
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace kiln {

// `rank` dims, dim i written as `dim(i)` returns it (a number, a symbol, an expression).
template <typename DimText>
std::string ShapeText(size_t rank, DimText&& dim) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += dim(i);
  }
  return s + "]";
}

// Dims that are all numbers.
inline std::string ShapeText(std::span<const int64_t> dims) {
  return ShapeText(dims.size(), [&](size_t i) { return std::to_string(dims[i]); });
}

}  // namespace kiln
