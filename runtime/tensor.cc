// DType facts and TensorView helpers. Nothing here allocates.
#include "kiln/tensor.h"

#include <cstdint>
#include <limits>

namespace kiln {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kUInt16: return 2;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kUInt32: return 4;
    case DType::kUInt64: return 8;
    case DType::kBFloat16: return 2;
    case DType::kUndefined: return 0;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBFloat16: return "bfloat16";
    case DType::kUndefined: break;
  }
  // Unknown values name their number. The strings live in a static table so the returned
  // view stays valid; values outside it share one name. An array of characters, not of
  // pointers: pointers would each need a relocation when the library is loaded.
  static constexpr char kUndefinedNames[][14] = {
      "undefined(0)",  "undefined(1)",  "undefined(2)",  "undefined(3)",  "undefined(4)",
      "undefined(5)",  "undefined(6)",  "undefined(7)",  "undefined(8)",  "undefined(9)",
      "undefined(10)", "undefined(11)", "undefined(12)", "undefined(13)", "undefined(14)",
      "undefined(15)", "undefined(16)", "undefined(17)", "undefined(18)", "undefined(19)",
      "undefined(20)", "undefined(21)", "undefined(22)", "undefined(23)", "undefined(24)"};
  const int32_t v = static_cast<int32_t>(dtype);
  if (v >= 0 && v < static_cast<int32_t>(std::size(kUndefinedNames))) return kUndefinedNames[v];
  return "undefined(?)";
}

bool IsValidDType(int32_t value) {
  switch (static_cast<DType>(value)) {
    case DType::kFloat32:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kUInt16:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kBool:
    case DType::kFloat16:
    case DType::kFloat64:
    case DType::kUInt32:
    case DType::kUInt64:
    case DType::kBFloat16:
      return true;
    case DType::kUndefined:
      return false;
  }
  return false;
}

TensorView TensorView::Host(const void* data, DType dtype, std::initializer_list<int64_t> dims) {
  return Host(data, dtype, dims.begin(), static_cast<int32_t>(dims.size()));
}

TensorView TensorView::Host(const void* data, DType dtype, const int64_t* dims, int32_t rank) {
  TensorView v;
  v.data = const_cast<void*>(data);  // views are non-const by design; the runtime only reads inputs
  v.dtype = dtype;
  v.memory = MemoryKind::kHost;
  if (rank < 0) rank = 0;
  const int32_t kept = rank > kMaxRank ? kMaxRank : rank;
  for (int32_t i = 0; i < kept; ++i) v.dims[i] = dims[i];
  v.rank = rank > kMaxRank ? kMaxRank + 1 : rank;
  return v;
}

// A negative dim makes the count meaningless: report -1 so callers comparing sizes fail
// rather than see a plausible number. A zero dim wins over saturation (0 elements).
int64_t TensorView::num_elements() const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int32_t n = rank < 0 ? 0 : (rank > kMaxRank ? kMaxRank : rank);
  int64_t product = 1;
  bool saturated = false;
  for (int32_t i = 0; i < n; ++i) {
    const int64_t d = dims[i];
    if (d < 0) return -1;
    if (d == 0) return 0;
    if (saturated) continue;
    if (product > kMax / d) saturated = true;
    else product *= d;
  }
  return saturated ? kMax : product;
}

int64_t TensorView::num_bytes() const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t n = num_elements();
  if (n < 0) return -1;
  const int64_t size = static_cast<int64_t>(DTypeSize(dtype));
  if (size == 0 || n == 0) return 0;
  return n > kMax / size ? kMax : n * size;
}

}  // namespace kiln
