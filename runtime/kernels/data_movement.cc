// Data movement: copies (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout),
// Transpose, Concat, Split, Slice, Gather, GatherElements, Pad, Expand, Tile,
// DepthToSpace and SpaceToDepth. All are dtype-agnostic: they move elements by size.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

// dst[i...] = src[sum(i_k * src_strides[k])] over an N-D output; strides may be zero
// (broadcast) or negative (reversed slices).
template <typename U>
void StridedCopyT(const U* src, const int64_t* src_strides, const int64_t* dims, int r, U* dst) {
  if (Product(dims, 0, r) == 0) return;
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = dims[r - 1], is = src_strides[r - 1];
  NdIndex it(dims, r);
  do {
    const U* s = src + it.Offset(src_strides, r - 1);
    if (is == 1) {
      std::memcpy(dst, s, inner * sizeof(U));
    } else if (is == 0) {
      std::fill(dst, dst + inner, s[0]);
    } else {
      for (int64_t j = 0; j < inner; ++j) dst[j] = s[j * is];
    }
    dst += inner;
  } while (it.Next(r - 1));
}

bool StridedCopy(const void* src, size_t esize, const int64_t* src_strides, const int64_t* dims,
                 int r, void* dst) {
  return VisitBySize(esize, [&](auto tag) {
    using U = decltype(tag);
    StridedCopyT<U>(static_cast<const U*>(src), src_strides, dims, r, static_cast<U*>(dst));
  });
}

Status CheckSameDType(const TensorRef& a, const TensorRef& b, std::string_view op) {
  if (a.dtype != b.dtype) {
    return OpError(op, "output dtype " + DTypeStr(b.dtype) + " differs from input dtype " +
                           DTypeStr(a.dtype));
  }
  if (DTypeSize(a.dtype) == 0) return OpError(op, "unsupported dtype " + DTypeStr(a.dtype));
  return Status::Ok();
}

// --- Plain copies: the shape change is already in the output dims. ------------------------

Status CopyKernel(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, name));
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, name));
  if (x.data != y.data && x.num_elements > 0) {
    std::memmove(y.data, x.data, static_cast<size_t>(x.num_elements) * DTypeSize(x.dtype));
  }
  return Status::Ok();
}

Status Reshape(const KernelCall& c) { return CopyKernel(c, "Reshape"); }
Status Flatten(const KernelCall& c) { return CopyKernel(c, "Flatten"); }
Status Squeeze(const KernelCall& c) { return CopyKernel(c, "Squeeze"); }
Status Unsqueeze(const KernelCall& c) { return CopyKernel(c, "Unsqueeze"); }
Status Identity(const KernelCall& c) { return CopyKernel(c, "Identity"); }

// Inference-mode Dropout is the identity; the optional mask is all true.
Status Dropout(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CopyKernel(call, "Dropout"));
  if (const TensorRef* mask = OptionalOutput(call, 1)) {
    if (mask->dtype != DType::kBool || mask->num_elements != call.inputs[0].num_elements) {
      return OpError("Dropout", "mask output must be bool shaped like the input");
    }
    std::memset(mask->data, 1, static_cast<size_t>(mask->num_elements));
  }
  return Status::Ok();
}

// --- Transpose -----------------------------------------------------------------------------

Status TransposeKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Transpose";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, kName));
  const int r = x.rank;
  if (y.rank != r) return OpError(kName, "output rank differs from input rank");
  int perm[kMaxRank];
  const auto& p = call.attrs.GetInts("perm");
  if (p.empty()) {
    for (int i = 0; i < r; ++i) perm[i] = r - 1 - i;
  } else {
    if (static_cast<int>(p.size()) != r) {
      return OpError(kName, "perm has " + std::to_string(p.size()) + " entries for input " + ShapeStr(x));
    }
    bool seen[kMaxRank] = {};
    for (int i = 0; i < r; ++i) {
      int a = 0;
      if (!NormalizeAxis(p[i], r, &a) || seen[a]) {
        return OpError(kName, "perm is not a permutation of 0.." + std::to_string(r - 1));
      }
      seen[a] = true;
      perm[i] = a;
    }
  }
  int64_t in_strides[kMaxRank], src_strides[kMaxRank];
  ContiguousStrides(x.dims, r, in_strides);
  for (int i = 0; i < r; ++i) {
    if (y.dims[i] != x.dims[perm[i]]) {
      return OpError(kName, "output " + ShapeStr(y) + " is not input " + ShapeStr(x) + " permuted");
    }
    src_strides[i] = in_strides[perm[i]];
  }
  StridedCopy(x.data, DTypeSize(x.dtype), src_strides, y.dims, r, y.data);
  return Status::Ok();
}

// --- Concat / Split ------------------------------------------------------------------------

// Concat and Split are one operation run in opposite directions: a `whole` tensor and
// `parts` that tile it along `axis`. "part"/"whole" name the sides in messages
// ("input"/"output" for Concat, the reverse for Split).
Status ReadConcatAxis(const KernelCall& call, const TensorRef& whole, std::string_view op,
                      const char* whole_name, int* axis) {
  if (!NormalizeAxis(call.attrs.GetInt("axis", 0), whole.rank, axis)) {
    return OpError(op, "axis " + std::to_string(call.attrs.GetInt("axis", 0)) + " is out of range for " +
                           whole_name + " " + ShapeStr(whole));
  }
  return Status::Ok();
}

Status CheckPartsTile(std::span<const TensorRef> parts, const TensorRef& whole, int axis,
                      std::string_view op, const std::string& part_name, const std::string& whole_name) {
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorRef& p = parts[i];
    if (!p.present()) return OpError(op, part_name + " " + std::to_string(i) + " is absent");
    KILN_RETURN_IF_ERROR(CheckSameDType(p, whole, op));
    bool ok = p.rank == whole.rank;
    for (int d = 0; ok && d < whole.rank; ++d) ok = d == axis || p.dims[d] == whole.dims[d];
    if (!ok) {
      return OpError(op, part_name + " " + std::to_string(i) + " " + ShapeStr(p) + " does not match " +
                             whole_name + " " + ShapeStr(whole) + " outside axis " + std::to_string(axis));
    }
    total += p.dims[axis];
  }
  if (total != whole.dims[axis]) {
    return OpError(op, part_name + "s add up to " + std::to_string(total) + " along axis " +
                           std::to_string(axis) + ", " + whole_name + " has " +
                           std::to_string(whole.dims[axis]));
  }
  return Status::Ok();
}

// Copies every part into its slab of `whole` (Concat), or the slabs out (Split).
void CopySlabs(std::span<const TensorRef> parts, const TensorRef& whole, int axis, bool into_whole) {
  const int64_t outer = Product(whole.dims, 0, axis);
  const int64_t inner_bytes =
      Product(whole.dims, axis + 1, whole.rank) * static_cast<int64_t>(DTypeSize(whole.dtype));
  const int64_t whole_row = whole.dims[axis] * inner_bytes;
  int64_t col = 0;
  for (const TensorRef& p : parts) {
    const int64_t row = p.dims[axis] * inner_bytes;
    char* slab = static_cast<char*>(whole.data) + col;
    char* part = static_cast<char*>(p.data);
    for (int64_t o = 0; row > 0 && o < outer; ++o) {
      if (into_whole) {
        std::memcpy(slab + o * whole_row, part + o * row, row);
      } else {
        std::memcpy(part + o * row, slab + o * whole_row, row);
      }
    }
    col += row;
  }
}

Status ConcatKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Concat";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef& y = call.outputs[0];
  int axis = 0;
  KILN_RETURN_IF_ERROR(ReadConcatAxis(call, y, kName, "output", &axis));
  KILN_RETURN_IF_ERROR(CheckPartsTile(call.inputs, y, axis, kName, "input", "output"));
  CopySlabs(call.inputs, y, axis, /*into_whole=*/true);
  return Status::Ok();
}

Status SplitKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Split";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef& x = call.inputs[0];
  int axis = 0;
  KILN_RETURN_IF_ERROR(ReadConcatAxis(call, x, kName, "input", &axis));
  // The output dims already encode `split` / `num_outputs`; check they tile the input.
  KILN_RETURN_IF_ERROR(CheckPartsTile(call.outputs, x, axis, kName, "output", "input"));
  CopySlabs(call.outputs, x, axis, /*into_whole=*/false);
  return Status::Ok();
}

// --- Slice ---------------------------------------------------------------------------------

Status SliceKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Slice";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 3));
  const TensorRef &x = call.inputs[0], &starts = call.inputs[1], &ends = call.inputs[2];
  const TensorRef& y = call.outputs[0];
  const TensorRef* axes = OptionalInput(call, 3);
  const TensorRef* steps = OptionalInput(call, 4);
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, kName));
  if (y.rank != x.rank) return OpError(kName, "output rank differs from input rank");
  const int64_t n = starts.num_elements;
  for (const TensorRef* t : {&starts, &ends, axes, steps}) {
    if (!t) continue;
    if (!IsIndexType(t->dtype)) return OpError(kName, "starts/ends/axes/steps must be int32 or int64");
    if (t->num_elements != n) {
      return OpError(kName, "starts, ends, axes and steps must have the same length, got " +
                                std::to_string(n) + " and " + std::to_string(t->num_elements));
    }
  }
  // Starts or ends computed from tensor data (compiler/ops/meta_data_movement.cc
  // DataSliceMeta): the length on the one axis sliced is a run-time dim, reported here, and the
  // output is packed for it.
  if (call.runtime_size && n != 1)
    return OpError(kName, "a run-time length needs one axis sliced, found " + std::to_string(n));
  int64_t start[kMaxRank], step[kMaxRank], len[kMaxRank];
  int runtime_axis = -1;
  bool set[kMaxRank] = {};
  for (int d = 0; d < x.rank; ++d) {
    start[d] = 0;
    step[d] = 1;
    len[d] = x.dims[d];
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = axes ? IndexAt(*axes, i) : i;
    int d = 0;
    if (!NormalizeAxis(a, x.rank, &d)) {
      return OpError(kName, "axis " + std::to_string(a) + " is out of range for input " + ShapeStr(x));
    }
    if (set[d]) return OpError(kName, "axis " + std::to_string(a) + " is repeated");
    set[d] = true;
    const int64_t dim = x.dims[d];
    const int64_t st = steps ? IndexAt(*steps, i) : 1;
    if (st == 0) return OpError(kName, "step on axis " + std::to_string(a) + " is 0");
    int64_t s = IndexAt(starts, i), e = IndexAt(ends, i);
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len[d] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      len[d] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    start[d] = s;
    step[d] = st;
    if (call.runtime_size) runtime_axis = d;
  }
  int64_t in_strides[kMaxRank], src_strides[kMaxRank], out_dims[kMaxRank];
  ContiguousStrides(x.dims, x.rank, in_strides);
  int64_t base = 0;
  for (int d = 0; d < x.rank; ++d) {
    out_dims[d] = len[d];
    if (d == runtime_axis) {
      KILN_RETURN_IF_ERROR(ReportRuntimeSize(call, kName, len[d], len[d] <= y.dims[d]));
    } else if (len[d] != y.dims[d]) {
      return OpError(kName, "output " + ShapeStr(y) + " has " + std::to_string(y.dims[d]) +
                                " elements on axis " + std::to_string(d) + ", the slice gives " +
                                std::to_string(len[d]));
    }
    if (len[d] > 0) base += start[d] * in_strides[d];
    src_strides[d] = step[d] * in_strides[d];
  }
  if (Product(out_dims, 0, x.rank) == 0) return Status::Ok();
  const size_t esize = DTypeSize(x.dtype);
  StridedCopy(static_cast<const char*>(x.data) + base * static_cast<int64_t>(esize), esize,
              src_strides, out_dims, y.rank, y.data);
  return Status::Ok();
}

// --- Gather / GatherElements ---------------------------------------------------------------

Status GatherKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Gather";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &x = call.inputs[0], &ind = call.inputs[1], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, kName));
  if (!IsIndexType(ind.dtype)) return OpError(kName, "indices must be int32 or int64, got " + DTypeStr(ind.dtype));
  int axis = 0;
  if (!NormalizeAxis(call.attrs.GetInt("axis", 0), x.rank, &axis)) {
    return OpError(kName, "axis " + std::to_string(call.attrs.GetInt("axis", 0)) +
                              " is out of range for input " + ShapeStr(x));
  }
  const int64_t outer = Product(x.dims, 0, axis), n = x.dims[axis];
  const int64_t inner = Product(x.dims, axis + 1, x.rank);
  if (y.num_elements != outer * ind.num_elements * inner) {
    return OpError(kName, "output " + ShapeStr(y) + " does not match data " + ShapeStr(x) +
                              " gathered with indices " + ShapeStr(ind) + " on axis " + std::to_string(axis));
  }
  for (int64_t i = 0; i < ind.num_elements; ++i) {
    const int64_t v = IndexAt(ind, i);
    if (v < -n || v >= n) {
      return OpError(kName, "index " + std::to_string(v) + " is out of range [" + std::to_string(-n) +
                                ", " + std::to_string(n) + ") on axis " + std::to_string(axis) +
                                " of data " + ShapeStr(x));
    }
  }
  const size_t esize = DTypeSize(x.dtype);
  const size_t block = static_cast<size_t>(inner) * esize;
  const char* src = static_cast<const char*>(x.data);
  char* dst = static_cast<char*>(y.data);
  if (block == 0) return Status::Ok();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < ind.num_elements; ++i) {
      int64_t v = IndexAt(ind, i);
      if (v < 0) v += n;
      std::memcpy(dst, src + (o * n + v) * block, block);
      dst += block;
    }
  }
  return Status::Ok();
}

Status GatherElementsKernel(const KernelCall& call) {
  constexpr std::string_view kName = "GatherElements";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &x = call.inputs[0], &ind = call.inputs[1], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, kName));
  if (!IsIndexType(ind.dtype)) return OpError(kName, "indices must be int32 or int64, got " + DTypeStr(ind.dtype));
  if (ind.rank != x.rank || y.rank != x.rank || y.num_elements != ind.num_elements) {
    return OpError(kName, "data " + ShapeStr(x) + ", indices " + ShapeStr(ind) + " and output " +
                              ShapeStr(y) + " must have the same rank, output shaped like indices");
  }
  int axis = 0;
  if (!NormalizeAxis(call.attrs.GetInt("axis", 0), x.rank, &axis)) {
    return OpError(kName, "axis " + std::to_string(call.attrs.GetInt("axis", 0)) +
                              " is out of range for input " + ShapeStr(x));
  }
  for (int d = 0; d < x.rank; ++d) {
    if (d != axis && ind.dims[d] > x.dims[d]) {
      return OpError(kName, "indices " + ShapeStr(ind) + " exceed data " + ShapeStr(x) + " on axis " +
                                std::to_string(d));
    }
  }
  if (y.num_elements == 0) return Status::Ok();
  int64_t strides[kMaxRank];
  ContiguousStrides(x.dims, x.rank, strides);
  const int64_t n = x.dims[axis];
  const size_t esize = DTypeSize(x.dtype);
  Status status;
  VisitBySize(esize, [&](auto tag) {
    using U = decltype(tag);
    const U* px = x.as<const U>();
    U* py = y.as<U>();
    NdIndex it(ind.dims, ind.rank);
    for (int64_t i = 0; i < ind.num_elements; ++i, it.Next(ind.rank)) {
      int64_t v = IndexAt(ind, i);
      if (v < -n || v >= n) {
        status = OpError(kName, "index " + std::to_string(v) + " is out of range [" + std::to_string(-n) +
                                    ", " + std::to_string(n) + ") on axis " + std::to_string(axis));
        return;
      }
      if (v < 0) v += n;
      int64_t off = 0;
      for (int d = 0; d < x.rank; ++d) off += (d == axis ? v : it.idx[d]) * strides[d];
      py[i] = px[off];
    }
  });
  return status;
}

// --- Pad -----------------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Maps an output coordinate (already shifted by the begin pad) into [0, dim), or -1 for
// constant fill.
// The source coordinate of padded coordinate c (in the input's numbering), or -1 for the fill
// value. Negative pads crop first (docs/semantics.md): the elements left are [lo, lo + n), and
// edge, wrap and reflect pad around those.
inline int64_t PadSource(int64_t c, int64_t lo, int64_t n, PadMode mode) {
  if (c >= lo && c < lo + n) return c;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return c < lo ? lo : lo + n - 1;
    case PadMode::kWrap: {
      int64_t m = (c - lo) % n;
      return lo + (m < 0 ? m + n : m);
    }
    case PadMode::kReflect: {
      if (n == 1) return lo;
      const int64_t period = 2 * (n - 1);
      int64_t m = (c - lo) % period;
      if (m < 0) m += period;
      return lo + (m >= n ? period - m : m);
    }
  }
  return -1;
}

template <typename U>
void PadT(const TensorRef& x, const TensorRef& y, const int64_t* begin, const int64_t* end, PadMode mode, U fill) {
  const int r = x.rank;
  const U* px = x.as<const U>();
  U* py = y.as<U>();
  if (y.num_elements == 0) return;
  if (r == 0) {
    py[0] = px[0];
    return;
  }
  int64_t strides[kMaxRank], lo[kMaxRank], n[kMaxRank];
  ContiguousStrides(x.dims, r, strides);
  for (int d = 0; d < r; ++d) {
    lo[d] = std::max<int64_t>(-begin[d], 0);
    n[d] = x.dims[d] + std::min<int64_t>(begin[d], 0) + std::min<int64_t>(end[d], 0);
  }
  const int64_t inner = y.dims[r - 1], b = begin[r - 1], lo_in = lo[r - 1], n_in = n[r - 1];
  NdIndex it(y.dims, r);
  do {
    int64_t off = 0;
    bool fill_row = false;
    for (int d = 0; d < r - 1; ++d) {
      const int64_t s = PadSource(it.idx[d] - begin[d], lo[d], n[d], mode);
      if (s < 0) { fill_row = true; break; }
      off += s * strides[d];
    }
    if (fill_row) {
      std::fill(py, py + inner, fill);
    } else {
      const U* row = px + off;
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t s = PadSource(j - b, lo_in, n_in, mode);
        py[j] = s < 0 ? fill : row[s];
      }
    }
    py += inner;
  } while (it.Next(r - 1));
}

Status PadKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Pad";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &x = call.inputs[0], &pads = call.inputs[1], &y = call.outputs[0];
  const TensorRef* value = OptionalInput(call, 2);
  const TensorRef* axes = OptionalInput(call, 3);
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, kName));
  if (y.rank != x.rank) return OpError(kName, "output rank differs from input rank");
  if (!IsIndexType(pads.dtype)) return OpError(kName, "pads must be int64, got " + DTypeStr(pads.dtype));
  const std::string_view mode_s = call.attrs.GetString("mode", "constant");
  PadMode mode;
  if (mode_s == "constant") mode = PadMode::kConstant;
  else if (mode_s == "reflect") mode = PadMode::kReflect;
  else if (mode_s == "edge") mode = PadMode::kEdge;
  else if (mode_s == "wrap") mode = PadMode::kWrap;
  else return OpError(kName, "unknown mode '" + std::string(mode_s) + "'");
  const int64_t naxes = axes ? axes->num_elements : x.rank;
  if (pads.num_elements != 2 * naxes) {
    return OpError(kName, "pads has " + std::to_string(pads.num_elements) + " values, expected " +
                              std::to_string(2 * naxes));
  }
  if (axes && !IsIndexType(axes->dtype)) return OpError(kName, "axes must be int32 or int64");
  int64_t begin[kMaxRank] = {}, end[kMaxRank] = {};
  for (int64_t i = 0; i < naxes; ++i) {
    const int64_t a = axes ? IndexAt(*axes, i) : i;
    int d = 0;
    if (!NormalizeAxis(a, x.rank, &d)) {
      return OpError(kName, "axis " + std::to_string(a) + " is out of range for input " + ShapeStr(x));
    }
    begin[d] = IndexAt(pads, i);
    end[d] = IndexAt(pads, i + naxes);
  }
  for (int d = 0; d < x.rank; ++d) {
    if (x.dims[d] + begin[d] + end[d] != y.dims[d]) {
      return OpError(kName, "output " + ShapeStr(y) + " does not match input " + ShapeStr(x) +
                                " padded on axis " + std::to_string(d));
    }
    // Negative pads crop first (docs/semantics.md): edge, wrap and reflect pad around what
    // they leave, which must not be empty, and reflect may not reach past its opposite edge.
    const int64_t left = x.dims[d] + std::min<int64_t>(begin[d], 0) + std::min<int64_t>(end[d], 0);
    if (mode != PadMode::kConstant && left <= 0 && y.dims[d] > 0) {
      return OpError(kName, std::string(mode_s) + " padding needs a non-empty axis " + std::to_string(d) +
                                (left < x.dims[d] ? " (after its negative pads)" : ""));
    }
    if (mode == PadMode::kReflect && y.dims[d] > 0 &&
        ((begin[d] > 0 && begin[d] > left - 1) || (end[d] > 0 && end[d] > left - 1))) {
      return OpError(kName, "reflect pads " + std::to_string(begin[d]) + "," + std::to_string(end[d]) +
                                " exceed " + std::to_string(left - 1) + " on axis " + std::to_string(d) +
                                " (reflection stays inside the " + std::to_string(left) +
                                " elements that the negative pads leave, less one)");
    }
  }
  if (value && value->dtype != x.dtype) {
    return OpError(kName, "constant_value dtype " + DTypeStr(value->dtype) + " differs from data dtype " +
                              DTypeStr(x.dtype));
  }
  const size_t esize = DTypeSize(x.dtype);
  VisitBySize(esize, [&](auto tag) {
    using U = decltype(tag);
    U fill{};
    if (value && value->num_elements > 0) std::memcpy(&fill, value->data, sizeof(U));
    PadT<U>(x, y, begin, end, mode, fill);
  });
  return Status::Ok();
}

// --- Expand / Tile -------------------------------------------------------------------------

Status ExpandKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Expand";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, kName));
  int64_t strides[kMaxRank] = {};
  if (y.rank > kMaxRank || !BroadcastStrides(x, y, strides)) {
    return OpError(kName, "input " + ShapeStr(x) + " does not broadcast to output " + ShapeStr(y));
  }
  StridedCopy(x.data, DTypeSize(x.dtype), strides, y.dims, y.rank, y.data);
  return Status::Ok();
}

Status TileKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Tile";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, kName));
  if (y.rank != x.rank) return OpError(kName, "output rank differs from input rank");
  for (int d = 0; d < x.rank; ++d) {
    if ((x.dims[d] == 0 && y.dims[d] != 0) || (x.dims[d] != 0 && y.dims[d] % x.dims[d] != 0)) {
      return OpError(kName, "output " + ShapeStr(y) + " is not a tiling of input " + ShapeStr(x));
    }
  }
  if (y.num_elements == 0) return Status::Ok();
  const int r = x.rank;
  int64_t strides[kMaxRank];
  ContiguousStrides(x.dims, r, strides);
  VisitBySize(DTypeSize(x.dtype), [&](auto tag) {
    using U = decltype(tag);
    const U* px = x.as<const U>();
    U* py = y.as<U>();
    if (r == 0) {
      py[0] = px[0];
      return;
    }
    const int64_t inner = y.dims[r - 1], din = x.dims[r - 1];
    NdIndex it(y.dims, r);
    do {
      int64_t off = 0;
      for (int d = 0; d < r - 1; ++d) off += (it.idx[d] % x.dims[d]) * strides[d];
      const U* row = px + off;
      for (int64_t j = 0; j < inner; j += din) std::memcpy(py + j, row, din * sizeof(U));
      py += inner;
    } while (it.Next(r - 1));
  });
  return Status::Ok();
}

// --- DepthToSpace / SpaceToDepth: fixed 6-D transposes -------------------------------------

Status BlockRearrange(const KernelCall& call, std::string_view name, bool to_space) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameDType(x, y, name));
  if (x.rank != 4 || y.rank != 4) return OpError(name, "expected 4-D input and output, got " + ShapeStr(x));
  const int64_t b = call.attrs.GetInt("blocksize", 0);
  if (b < 1) return OpError(name, "blocksize must be >= 1, got " + std::to_string(b));
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3];
  // blocksize^2 and the output dims must fit int64 (a hostile artifact may carry any blocksize).
  int64_t b2 = 0, hb = 0, wb = 0, cb2 = 0;
  const bool overflow = __builtin_mul_overflow(b, b, &b2) ||
                        (to_space ? __builtin_mul_overflow(h, b, &hb) || __builtin_mul_overflow(w, b, &wb)
                                  : __builtin_mul_overflow(c, b2, &cb2));
  if (overflow)
    return OpError(name, "blocksize " + std::to_string(b) + " with input " + ShapeStr(x) + " overflows int64");
  int64_t dims6[6];
  int perm[6];
  if (to_space) {
    if (c % b2 != 0) {
      return OpError(name, "channels " + std::to_string(c) + " are not divisible by blocksize^2 = " +
                               std::to_string(b2));
    }
    const int64_t expect[4] = {n, c / b2, hb, wb};
    if (!std::equal(expect, expect + 4, y.dims)) return OpError(name, "output " + ShapeStr(y) + " does not match input " + ShapeStr(x));
    const std::string_view mode = call.attrs.GetString("mode", "DCR");
    if (mode == "DCR") {
      const int64_t d[6] = {n, b, b, c / b2, h, w};
      const int p[6] = {0, 3, 4, 1, 5, 2};
      std::copy(d, d + 6, dims6);
      std::copy(p, p + 6, perm);
    } else if (mode == "CRD") {
      const int64_t d[6] = {n, c / b2, b, b, h, w};
      const int p[6] = {0, 1, 4, 2, 5, 3};
      std::copy(d, d + 6, dims6);
      std::copy(p, p + 6, perm);
    } else {
      return OpError(name, "mode must be DCR or CRD, got '" + std::string(mode) + "'");
    }
  } else {
    if (h % b != 0 || w % b != 0) {
      return OpError(name, "spatial dims of " + ShapeStr(x) + " are not divisible by blocksize " + std::to_string(b));
    }
    const int64_t expect[4] = {n, cb2, h / b, w / b};
    if (!std::equal(expect, expect + 4, y.dims)) return OpError(name, "output " + ShapeStr(y) + " does not match input " + ShapeStr(x));
    const int64_t d[6] = {n, c, h / b, b, w / b, b};
    const int p[6] = {0, 3, 5, 1, 2, 4};
    std::copy(d, d + 6, dims6);
    std::copy(p, p + 6, perm);
  }
  int64_t in_strides[6], src_strides[6], out_dims[6];
  ContiguousStrides(dims6, 6, in_strides);
  for (int i = 0; i < 6; ++i) {
    src_strides[i] = in_strides[perm[i]];
    out_dims[i] = dims6[perm[i]];
  }
  StridedCopy(x.data, DTypeSize(x.dtype), src_strides, out_dims, 6, y.data);
  return Status::Ok();
}

Status DepthToSpace(const KernelCall& c) { return BlockRearrange(c, "DepthToSpace", true); }
Status SpaceToDepth(const KernelCall& c) { return BlockRearrange(c, "SpaceToDepth", false); }

constexpr KernelDef kKernels[] = {
    {"Concat", ConcatKernel, nullptr, true},
    {"DepthToSpace", DepthToSpace, nullptr, true},
    {"Dropout", Dropout, nullptr, true},
    {"Expand", ExpandKernel, nullptr, true},
    {"Flatten", Flatten, nullptr, true},
    {"Gather", GatherKernel, nullptr, true},
    {"GatherElements", GatherElementsKernel, nullptr, true},
    {"Identity", Identity, nullptr, true},
    {"Pad", PadKernel, nullptr, true},
    {"Reshape", Reshape, nullptr, true},
    {"Slice", SliceKernel, nullptr, true, {}, /*runtime_size=*/true},
    {"SpaceToDepth", SpaceToDepth, nullptr, true},
    {"Split", SplitKernel, nullptr, true},
    {"Squeeze", Squeeze, nullptr, true},
    {"Tile", TileKernel, nullptr, true},
    {"Transpose", TransposeKernel, nullptr, true},
    {"Unsqueeze", Unsqueeze, nullptr, true},
};

}  // namespace

std::span<const KernelDef> DataMovementKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
