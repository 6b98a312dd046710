#include "python/src/arrays.h"

#include <cstring>
#include <memory>

namespace nb = nanobind;

namespace kiln::python {
namespace {

using nb::dlpack::dtype_code;

DType FromDlpack(nb::dlpack::dtype t) {
  if (t.lanes != 1) return DType::kUndefined;
  switch (static_cast<dtype_code>(t.code)) {
    case dtype_code::Float:
      return t.bits == 16 ? DType::kFloat16 : t.bits == 32 ? DType::kFloat32 : t.bits == 64 ? DType::kFloat64 : DType::kUndefined;
    case dtype_code::Bfloat: return t.bits == 16 ? DType::kBFloat16 : DType::kUndefined;
    case dtype_code::Bool: return t.bits == 8 ? DType::kBool : DType::kUndefined;
    case dtype_code::Int:
      return t.bits == 8 ? DType::kInt8 : t.bits == 16 ? DType::kInt16 : t.bits == 32 ? DType::kInt32
           : t.bits == 64 ? DType::kInt64 : DType::kUndefined;
    case dtype_code::UInt:
      return t.bits == 8 ? DType::kUInt8 : t.bits == 16 ? DType::kUInt16 : t.bits == 32 ? DType::kUInt32
           : t.bits == 64 ? DType::kUInt64 : DType::kUndefined;
    default: return DType::kUndefined;
  }
}

nb::dlpack::dtype ToDlpack(DType d) {
  auto make = [](dtype_code code, int bits) {
    nb::dlpack::dtype t;
    t.code = static_cast<uint8_t>(code);
    t.bits = static_cast<uint8_t>(bits);
    t.lanes = 1;
    return t;
  };
  switch (d) {
    case DType::kFloat16: return make(dtype_code::Float, 16);
    case DType::kFloat32: return make(dtype_code::Float, 32);
    case DType::kFloat64: return make(dtype_code::Float, 64);
    case DType::kBFloat16: return make(dtype_code::Bfloat, 16);
    case DType::kBool: return make(dtype_code::Bool, 8);
    case DType::kInt8: return make(dtype_code::Int, 8);
    case DType::kInt16: return make(dtype_code::Int, 16);
    case DType::kInt32: return make(dtype_code::Int, 32);
    case DType::kInt64: return make(dtype_code::Int, 64);
    case DType::kUInt8: return make(dtype_code::UInt, 8);
    case DType::kUInt16: return make(dtype_code::UInt, 16);
    case DType::kUInt32: return make(dtype_code::UInt, 32);
    case DType::kUInt64: return make(dtype_code::UInt, 64);
    default: return make(dtype_code::UInt, 8);
  }
}

std::string DlpackText(nb::dlpack::dtype t) {
  static const char* kCodes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string lanes = t.lanes != 1 ? " x " + std::to_string(t.lanes) + " lanes" : "";
  if (t.code >= 7) return "DLPack type code " + std::to_string(t.code) + " of " + std::to_string(t.bits) + " bits" + lanes;
  return kCodes[t.code] + std::to_string(t.bits) + lanes;
}

// A new NumPy array of t's dtype and shape, and its buffer.
nb::object NewNumpy(const TensorView& t, void** data) {
  const size_t bytes = static_cast<size_t>(t.num_bytes());
  auto* buffer = new uint8_t[bytes > 0 ? bytes : 1];
  nb::capsule owner(buffer, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  size_t shape[kMaxRank];
  for (int32_t d = 0; d < t.rank; ++d) shape[d] = static_cast<size_t>(t.dims[d]);
  *data = buffer;
  return nb::cast(nb::ndarray<nb::numpy>(buffer, static_cast<size_t>(t.rank), shape, owner, nullptr, ToDlpack(t.dtype)));
}

// Either kind of array: read-only inputs and writable outputs.
template <typename Array>
Result<TensorView> View(const Array& a, const std::string& what, int64_t rows) {
  const DType dtype = FromDlpack(a.dtype());
  if (dtype == DType::kUndefined)
    return InvalidArgument(what + ": data type " + DlpackText(a.dtype()) + " has no Kiln type");
  if (a.ndim() > static_cast<size_t>(kMaxRank))
    return InvalidArgument(what + ": rank " + std::to_string(a.ndim()) + " above " + std::to_string(kMaxRank));
  TensorView v;
  v.dtype = dtype;
  v.rank = static_cast<int32_t>(a.ndim());
  bool empty = false;  // an empty array's strides mean nothing (NumPy gives it strides of 0)
  for (int32_t d = 0; d < v.rank; ++d) {
    v.dims[d] = static_cast<int64_t>(a.shape(static_cast<size_t>(d)));
    empty = empty || v.dims[d] == 0;
  }
  if (rows > 0 && (v.rank != 4 || v.dims[2] > rows))
    return InvalidArgument(what + ": a bound cache's view is [batch, heads, rows in use, head size] of a buffer of " +
                           std::to_string(rows) + " rows per head, found rank " + std::to_string(v.rank) +
                           (v.rank == 4 ? " with " + std::to_string(v.dims[2]) + " rows" : ""));
  int64_t expected = 1;
  for (int32_t d = v.rank - 1; d >= 0 && !empty; --d) {
    const bool cache_rows = rows > 0 && d == 2;  // the buffer's rows, of which the view holds the first
    if (v.dims[d] > 1 && a.stride(static_cast<size_t>(d)) != expected)
      return InvalidArgument(what + ": not C-contiguous (stride " + std::to_string(a.stride(static_cast<size_t>(d))) +
                             " elements in dim " + std::to_string(d) + ", expected " + std::to_string(expected) +
                             (rows > 0 ? "); a bound cache's view is buffer[:, :, :rows] of a C-contiguous buffer"
                                       : "); pass numpy.ascontiguousarray(a) or a .contiguous() tensor"));
    if (__builtin_mul_overflow(expected, cache_rows ? rows : v.dims[d], &expected))
      return InvalidArgument(what + ": a buffer of " + std::to_string(rows) + " rows per head has more elements than "
                             "an int64 counts");
  }
  v.data = const_cast<void*>(a.data());
  if (a.device_type() == nb::device::cpu::value) {
    v.memory = MemoryKind::kHost;
  } else if (a.device_type() == nb::device::cuda::value) {
    v.memory = MemoryKind::kDevice;
  } else {
    return InvalidArgument(what + ": in memory of DLPack device type " + std::to_string(a.device_type()) +
                           "; Kiln reads the CPU's (1) and CUDA devices' (2)");
  }
  // An empty array may have no buffer; Kiln wants an aligned, non-null pointer still.
  alignas(16) static const uint8_t kNoBytes[16] = {};
  if (v.data == nullptr && v.num_elements() == 0) v.data = const_cast<uint8_t*>(kNoBytes);
  return v;
}

}  // namespace

Result<TensorView> ToView(const AnyArray& a, const std::string& what, int64_t rows) { return View(a, what, rows); }
Result<TensorView> ToView(const WritableArray& a, const std::string& what, int64_t rows) { return View(a, what, rows); }

nb::object ToNumpy(const TensorView& t) {
  void* data = nullptr;
  nb::object array = NewNumpy(t, &data);
  if (t.num_bytes() > 0) std::memcpy(data, t.data, static_cast<size_t>(t.num_bytes()));
  return array;
}

nb::object EmptyNumpy(const TensorView& t, TensorView* view) {
  void* data = nullptr;
  nb::object array = NewNumpy(t, &data);
  *view = TensorView::Host(data, t.dtype, t.dims, t.rank);
  return array;
}

}  // namespace kiln::python
