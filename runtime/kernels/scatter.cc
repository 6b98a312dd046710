// Index-driven writes and reads: ScatterElements (and its deprecated alias Scatter),
// ScatterND with their reductions, GatherND with batch_dims, and OneHot.
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Status ReadReduction(const KernelCall& call, std::string_view name, Reduction* r) {
  const std::string_view s = call.attrs.GetString("reduction", "none");
  if (s == "none") *r = Reduction::kNone;
  else if (s == "add") *r = Reduction::kAdd;
  else if (s == "mul") *r = Reduction::kMul;
  else if (s == "max") *r = Reduction::kMax;
  else if (s == "min") *r = Reduction::kMin;
  else return OpError(name, "attribute reduction must be none, add, mul, max or min, got '" + std::string(s) + "'");
  return Status::Ok();
}

template <typename T>
inline T Combine(Reduction r, T old, T v) {
  switch (r) {
    case Reduction::kAdd: return static_cast<T>(old + v);
    case Reduction::kMul: return static_cast<T>(old * v);
    case Reduction::kMax: return old < v ? v : old;
    case Reduction::kMin: return v < old ? v : old;
    default: return v;
  }
}

// Copies data to the output, then calls write(out_offset, update_offset) for each update;
// `write` applies the reduction in the element type.
template <typename F>
Status ScatterApply(const KernelCall& call, std::string_view name, Reduction red, F for_each_update) {
  const TensorRef &data = call.inputs[0], &updates = call.inputs[2], &y = call.outputs[0];
  if (y.dtype != data.dtype || updates.dtype != data.dtype || y.num_elements != data.num_elements)
    return OpError(name, "data, updates and output must share a dtype and the output data's shape");
  const size_t es = DTypeSize(data.dtype);
  if (y.data != data.data && data.num_elements) std::memmove(y.data, data.data, data.num_elements * es);
  if (red == Reduction::kNone) {
    auto* py = static_cast<uint8_t*>(y.data);
    const auto* pu = static_cast<const uint8_t*>(updates.data);
    return for_each_update([&](int64_t o, int64_t u, int64_t n) { std::memcpy(py + o * es, pu + u * es, n * es); });
  }
  Status st = Status::Ok();
  const bool ok = VisitNumeric(data.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* py = y.as<T>();
    const T* pu = updates.as<const T>();
    st = for_each_update([&](int64_t o, int64_t u, int64_t n) {
      for (int64_t j = 0; j < n; ++j) py[o + j] = Combine(red, py[o + j], pu[u + j]);
    });
  });
  if (!ok) return OpError(name, "reduction over dtype " + DTypeStr(data.dtype) + " is not supported");
  return st;
}

Status ScatterElements(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 3));
  const TensorRef &data = call.inputs[0], &idx = call.inputs[1], &updates = call.inputs[2];
  Reduction red;
  KILN_RETURN_IF_ERROR(ReadReduction(call, name, &red));
  if (!IsIndexType(idx.dtype)) return OpError(name, "indices must be int32 or int64, got " + DTypeStr(idx.dtype));
  if (idx.rank != data.rank || updates.rank != data.rank || idx.num_elements != updates.num_elements)
    return OpError(name, "indices " + ShapeStr(idx) + " and updates " + ShapeStr(updates) + " must have one shape of data's rank " + ShapeStr(data));
  int axis = 0;
  const int64_t a = call.attrs.GetInt("axis", 0);
  if (!NormalizeAxis(a, data.rank, &axis)) return OpError(name, "axis " + std::to_string(a) + " is out of range for " + ShapeStr(data));
  int64_t ds[kMaxRank];
  ContiguousStrides(data.dims, data.rank, ds);
  return ScatterApply(call, name, red, [&](auto write) -> Status {
    if (idx.num_elements == 0) return Status::Ok();
    NdIndex it(idx.dims, idx.rank);
    int64_t u = 0;
    do {
      int64_t k = IndexAt(idx, u);
      const int64_t dim = data.dims[axis];
      if (k < -dim || k >= dim) return OpError(name, "index " + std::to_string(k) + " is out of range for axis " + std::to_string(axis) + " of size " + std::to_string(dim));
      if (k < 0) k += dim;
      int64_t o = 0;
      for (int i = 0; i < data.rank; ++i) o += (i == axis ? k : it.idx[i]) * ds[i];
      write(o, u, 1);
      ++u;
    } while (it.Next(idx.rank));
    return Status::Ok();
  });
}

Status ScatterElementsKernel(const KernelCall& c) { return ScatterElements(c, "ScatterElements"); }
Status ScatterKernel(const KernelCall& c) { return ScatterElements(c, "Scatter"); }

// The offset of the slice that index tuple `t` (k elements) addresses in data; false when out of range.
bool TupleOffset(const TensorRef& idx, int64_t t, int64_t k, const TensorRef& data, int first_dim,
                 const int64_t* ds, int64_t* off) {
  *off = 0;
  for (int64_t j = 0; j < k; ++j) {
    int64_t v = IndexAt(idx, t * k + j);
    const int64_t dim = data.dims[first_dim + j];
    if (v < -dim || v >= dim) return false;
    if (v < 0) v += dim;
    *off += v * ds[first_dim + j];
  }
  return true;
}

Status ScatterND(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "ScatterND", 3));
  const TensorRef &data = call.inputs[0], &idx = call.inputs[1];
  Reduction red;
  KILN_RETURN_IF_ERROR(ReadReduction(call, "ScatterND", &red));
  if (idx.dtype != DType::kInt64 || idx.rank < 1) return OpError("ScatterND", "indices must be int64 of rank >= 1, got " + DTypeStr(idx.dtype) + " " + ShapeStr(idx));
  const int64_t k = idx.dims[idx.rank - 1];
  if (k < 1 || k > data.rank) return OpError("ScatterND", "indices' last dim " + std::to_string(k) + " must be in [1, rank of data " + std::to_string(data.rank) + "]");
  int64_t ds[kMaxRank];
  ContiguousStrides(data.dims, data.rank, ds);
  const int64_t slice = Product(data.dims, static_cast<int>(k), data.rank);
  const int64_t tuples = idx.num_elements / k;
  if (call.inputs[2].num_elements != tuples * slice)
    return OpError("ScatterND", "updates " + ShapeStr(call.inputs[2]) + " must have " + std::to_string(tuples * slice) + " elements");
  return ScatterApply(call, "ScatterND", red, [&](auto write) -> Status {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t o = 0;
      if (!TupleOffset(idx, t, k, data, 0, ds, &o)) return OpError("ScatterND", "index tuple " + std::to_string(t) + " is out of range for " + ShapeStr(data));
      write(o, t * slice, slice);
    }
    return Status::Ok();
  });
}

// GatherND: the first batch_dims dims of data and indices are paired; each index tuple
// then selects a slice of the matching batch entry.
Status GatherND(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "GatherND", 2));
  const TensorRef &data = call.inputs[0], &idx = call.inputs[1], &y = call.outputs[0];
  if (idx.dtype != DType::kInt64 || idx.rank < 1) return OpError("GatherND", "indices must be int64 of rank >= 1, got " + DTypeStr(idx.dtype) + " " + ShapeStr(idx));
  if (y.dtype != data.dtype) return OpError("GatherND", "output dtype differs from data's");
  const int b = static_cast<int>(call.attrs.GetInt("batch_dims", 0));
  const int64_t k = idx.dims[idx.rank - 1];
  if (b < 0 || b >= idx.rank || b + k > data.rank) return OpError("GatherND", "batch_dims " + std::to_string(b) + " and index length " + std::to_string(k) + " do not fit data " + ShapeStr(data) + " and indices " + ShapeStr(idx));
  int64_t ds[kMaxRank];
  ContiguousStrides(data.dims, data.rank, ds);
  const int64_t batch = Product(data.dims, 0, b), batch_stride = b > 0 ? ds[b - 1] : data.num_elements;
  const int64_t per_batch = Product(idx.dims, b, idx.rank - 1);
  const int64_t slice = Product(data.dims, b + static_cast<int>(k), data.rank);
  if (y.num_elements != batch * per_batch * slice) return OpError("GatherND", "output " + ShapeStr(y) + " does not match data " + ShapeStr(data) + " and indices " + ShapeStr(idx));
  const size_t es = DTypeSize(data.dtype);
  const auto* pd = static_cast<const uint8_t*>(data.data);
  auto* py = static_cast<uint8_t*>(y.data);
  for (int64_t m = 0; m < batch; ++m)
    for (int64_t t = 0; t < per_batch; ++t) {
      int64_t o = 0;
      if (!TupleOffset(idx, m * per_batch + t, k, data, b, ds, &o)) return OpError("GatherND", "index tuple " + std::to_string(m * per_batch + t) + " is out of range for " + ShapeStr(data));
      std::memcpy(py + ((m * per_batch + t) * slice) * es, pd + (m * batch_stride + o) * es, slice * es);
    }
  return Status::Ok();
}

// OneHot: output[..., i, ...] (i on `axis`) is values[1] where indices (negative ones
// counted from depth) equal i, else values[0].
Status OneHot(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, "OneHot", 3));
  const TensorRef &idx = call.inputs[0], &depth_in = call.inputs[1], &values = call.inputs[2], &y = call.outputs[0];
  if (values.num_elements != 2 || values.dtype != y.dtype) return OpError("OneHot", "values must be [off, on] of the output's dtype, got " + ShapeStr(values));
  if (depth_in.num_elements != 1) return OpError("OneHot", "depth must be a scalar, got " + ShapeStr(depth_in));
  const int64_t depth = FromDouble<int64_t>(NumberAt(depth_in, 0));
  int axis = 0;
  const int64_t a = call.attrs.GetInt("axis", -1);
  if (y.rank != idx.rank + 1 || !NormalizeAxis(a, y.rank, &axis) || y.dims[axis] != depth)
    return OpError("OneHot", "output " + ShapeStr(y) + " does not match indices " + ShapeStr(idx) + ", depth " + std::to_string(depth) + " and axis " + std::to_string(a));
  const int64_t outer = Product(idx.dims, 0, axis), inner = Product(idx.dims, axis, idx.rank);
  const size_t es = DTypeSize(y.dtype);
  const auto* pv = static_cast<const uint8_t*>(values.data);
  auto* py = static_cast<uint8_t*>(y.data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t d = 0; d < depth; ++d)
      for (int64_t i = 0; i < inner; ++i) {
        // Float indices are truncated; saturated (no UB) past int64, so an index of 2^63 is just out of range.
        int64_t v = FromDouble<int64_t>(NumberAt(idx, o * inner + i));
        if (v < 0) v += depth;
        std::memcpy(py + ((o * depth + d) * inner + i) * es, pv + (v == d ? es : 0), es);
      }
  return Status::Ok();
}

// halves: GatherND moves elements by size; OneHot reads indices and depth as numbers and
// the Scatters may reduce, so those run widened to float32 (runtime/kernels/widen.h).
constexpr KernelDef kKernels[] = {
    {"GatherND", GatherND, nullptr, true},
    {"OneHot", OneHot, nullptr},
    {"Scatter", ScatterKernel, nullptr},
    {"ScatterElements", ScatterElementsKernel, nullptr},
    {"ScatterND", ScatterND, nullptr},
};

}  // namespace

std::span<const KernelDef> ScatterKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
