// Compress, NonZero, Unique and kiln.IfOutput: ops whose output size depends on the data. The compiler sizes
// their outputs from constant data, or makes the size a run-time dim (compiler/ops/
// meta_selection.cc). The kernels check that the data gives the compiled size, or report the
// size they find (their outputs sized for the run-time dim's bound), so a mismatch is an error, never an
// out-of-bounds write.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/kernels/families.h"
#include "runtime/kernels/float_storage.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

bool NonZeroAt(const TensorRef& t, int64_t i) {
  if (IsFloatStorage(t.dtype)) return LoadFloat(t, i) != 0.0;  // -0.0 is zero
  bool nz = false;
  VisitBySize(DTypeSize(t.dtype), [&](auto tag) { nz = t.as<const decltype(tag)>()[i] != 0; });
  return nz;
}

// Copies `count` elements of `t`'s width from src[s] to dst[d].
void CopyElems(const TensorRef& src, int64_t s, const TensorRef& dst, int64_t d, int64_t count) {
  VisitBySize(DTypeSize(src.dtype), [&](auto tag) {
    using U = decltype(tag);
    std::copy_n(src.as<const U>() + s, count, dst.as<U>() + d);
  });
}

Status Compress(const KernelCall& call) {
  constexpr std::string_view kName = "Compress";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &x = call.inputs[0], &cond = call.inputs[1], &y = call.outputs[0];
  if (cond.dtype != DType::kBool || cond.rank != 1 || y.dtype != x.dtype)
    return OpError(kName, "condition must be a 1-D bool tensor and the output X's dtype, got " + DTypeStr(cond.dtype) +
                              ShapeStr(cond) + " and " + DTypeStr(y.dtype));
  const bool has_axis = call.attrs.Has("axis");
  int axis = 0;
  if (has_axis && (x.rank < 1 || !NormalizeAxis(call.attrs.GetInt("axis", 0), x.rank, &axis)))
    return OpError(kName, "axis is out of range for " + ShapeStr(x));
  const int64_t outer = has_axis ? Product(x.dims, 0, axis) : 1, n = has_axis ? x.dims[axis] : x.num_elements,
                inner = has_axis ? Product(x.dims, axis + 1, x.rank) : 1;
  const uint8_t* c = cond.as<const uint8_t>();
  const int64_t len = std::min(cond.num_elements, n);
  int64_t count = 0;
  for (int64_t j = 0; j < len; ++j) count += c[j] ? 1 : 0;
  if (cond.num_elements > n)
    return OpError(kName, "condition " + ShapeStr(cond) + " is longer than the " + std::to_string(n) +
                              " slices of " + ShapeStr(x));
  if (call.runtime_size) {
    KILN_RETURN_IF_ERROR(ReportRuntimeSize(call, kName, count, y.num_elements >= outer * count * inner));
  } else if (y.num_elements != outer * count * inner) {
    return OpError(kName, "condition " + ShapeStr(cond) + " selects " + std::to_string(count) + " of " +
                              std::to_string(n) + " slices of " + ShapeStr(x) + ", which does not match the output " +
                              ShapeStr(y) + " compiled from its constant value");
  }
  for (int64_t o = 0, k = 0; o < outer; ++o)
    for (int64_t j = 0; j < len; ++j)
      if (c[j]) CopyElems(x, (o * n + j) * inner, y, (k++) * inner, inner);
  return Status::Ok();
}

Status NonZero(const KernelCall& call) {
  constexpr std::string_view kName = "NonZero";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  int64_t count = 0;
  for (int64_t i = 0; i < x.num_elements; ++i) count += NonZeroAt(x, i) ? 1 : 0;
  const int r = std::max(1, x.rank);
  if (y.dtype != DType::kInt64 || y.rank != 2 || y.dims[0] != r || (!call.runtime_size && y.dims[1] != count))
    return OpError(kName, ShapeStr(x) + " has " + std::to_string(count) + " nonzero elements, which does not match "
                              "the output " + DTypeStr(y.dtype) + ShapeStr(y) + " compiled from its constant value");
  if (call.runtime_size) KILN_RETURN_IF_ERROR(ReportRuntimeSize(call, kName, count, y.dims[1] >= count));
  int64_t* py = y.as<int64_t>();
  const int64_t one = 1;
  NdIndex it(x.rank ? x.dims : &one, r);
  for (int64_t i = 0, k = 0; i < x.num_elements; ++i, it.Next(r)) {
    if (!NonZeroAt(x, i)) continue;
    for (int d = 0; d < r; ++d) py[d * count + k] = it.idx[d];
    ++k;
  }
  return Status::Ok();
}

// Element order for Unique: by value, every NaN equal and after the numbers.
int CompareAt(const TensorRef& t, int64_t a, int64_t b) {
  if (IsFloatStorage(t.dtype)) {
    const double u = LoadFloat(t, a), v = LoadFloat(t, b);
    if (std::isnan(u) || std::isnan(v)) return std::isnan(u) == std::isnan(v) ? 0 : std::isnan(u) ? 1 : -1;
    return u < v ? -1 : u > v ? 1 : 0;
  }
  int r = 0;
  auto cmp = [&](auto tag) {
    using T = decltype(tag);
    const T u = t.as<const T>()[a], v = t.as<const T>()[b];
    r = u < v ? -1 : u > v ? 1 : 0;
  };
  if (!VisitNumeric(t.dtype, cmp)) cmp(uint8_t{});  // bool
  return r;
}

// Slices along the axis (single elements without one): outer x n x inner.
struct Slices {
  int64_t outer = 1, n = 0, inner = 1;
};
bool UniqueSlices(const AttrMap& attrs, const TensorRef& x, Slices* s) {
  if (!attrs.Has("axis")) {
    *s = {1, x.num_elements, 1};
    return true;
  }
  int axis = 0;
  if (x.rank < 1 || !NormalizeAxis(attrs.GetInt("axis", 0), x.rank, &axis)) return false;
  *s = {Product(x.dims, 0, axis), x.dims[axis], Product(x.dims, axis + 1, x.rank)};
  return true;
}

size_t UniqueWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef>) {
  Slices s;
  if (inputs.empty() || !inputs[0].present() || !UniqueSlices(attrs, inputs[0], &s)) return 0;
  return static_cast<size_t>(s.n) * 3 * sizeof(int64_t);
}

// Sorts the slice indices (ties by index, so each group starts at its first occurrence),
// numbers the groups in sorted order or in order of first occurrence, and writes the four
// outputs: unique slices, their first indices, each slice's group, each group's size.
Status Unique(const KernelCall& call) {
  constexpr std::string_view kName = "Unique";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  Slices s;
  if (!UniqueSlices(call.attrs, x, &s) || y.dtype != x.dtype)
    return OpError(kName, "axis is out of range for " + ShapeStr(x) + ", or the output dtype is not X's");
  const int64_t n = s.n;
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, static_cast<size_t>(n) * 3 * sizeof(int64_t), kName));
  int64_t* order = static_cast<int64_t*>(call.workspace);
  int64_t* group = order + n;  // group of each slice, then renumbered
  int64_t* rank = group + n;   // output position of each group
  auto compare = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i)
        if (int r = CompareAt(x, (o * n + a) * s.inner + i, (o * n + b) * s.inner + i)) return r;
    return 0;
  };
  for (int64_t j = 0; j < n; ++j) order[j] = j;
  std::sort(order, order + n, [&](int64_t a, int64_t b) {
    const int r = compare(a, b);
    return r != 0 ? r < 0 : a < b;
  });
  int64_t groups = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (k == 0 || compare(order[k - 1], order[k]) != 0) ++groups;
    group[order[k]] = groups - 1;
  }
  const int64_t want_y = s.outer * groups * s.inner;
  const TensorRef *indices = OptionalOutput(call, 1), *inverse = OptionalOutput(call, 2),
                  *counts = OptionalOutput(call, 3);
  if (call.runtime_size) {
    const bool fits = y.num_elements >= want_y && (!indices || indices->num_elements >= groups) &&
                      (!inverse || inverse->num_elements == n) && (!counts || counts->num_elements >= groups);
    KILN_RETURN_IF_ERROR(ReportRuntimeSize(call, kName, groups, fits));
  } else if (y.num_elements != want_y || (indices && indices->num_elements != groups) ||
             (inverse && inverse->num_elements != n) || (counts && counts->num_elements != groups)) {
    return OpError(kName, ShapeStr(x) + " has " + std::to_string(groups) + " unique slices, which does not match "
                              "the outputs compiled from its constant value (Y " + ShapeStr(y) + ")");
  }
  const bool sorted = call.attrs.GetInt("sorted", 1) != 0;
  if (sorted) {
    for (int64_t g = 0; g < groups; ++g) rank[g] = g;
  } else {
    for (int64_t g = 0; g < groups; ++g) rank[g] = -1;
    int64_t next = 0;
    for (int64_t j = 0; j < n; ++j)
      if (rank[group[j]] < 0) rank[group[j]] = next++;
  }
  if (counts)
    for (int64_t g = 0; g < groups; ++g) counts->as<int64_t>()[g] = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t j = order[k], out = rank[group[j]];
    if (counts) ++counts->as<int64_t>()[out];
    if (k > 0 && group[order[k - 1]] == group[j]) continue;  // not the group's first occurrence
    if (indices) indices->as<int64_t>()[out] = j;
    for (int64_t o = 0; o < s.outer; ++o) CopyElems(x, (o * n + j) * s.inner, y, (o * groups + out) * s.inner, s.inner);
  }
  if (inverse)
    for (int64_t j = 0; j < n; ++j) inverse->as<int64_t>()[j] = rank[group[j]];
  return Status::Ok();
}

// kiln.IfOutput(cond, then_value, else_value): a copy of the value `cond` picks, an output of a
// run-time If whose branches give it shapes that differ in dim `axis` (a run-time dim: the
// output is sized for the larger).
Status IfOutput(const KernelCall& call) {
  constexpr std::string_view kName = "kiln.IfOutput";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 3));
  const TensorRef &cond = call.inputs[0], &y = call.outputs[0];
  if (cond.dtype != DType::kBool || cond.num_elements != 1)
    return OpError(kName, "cond: expected one bool, found " + DTypeStr(cond.dtype) + ShapeStr(cond));
  const TensorRef& x = call.inputs[*cond.as<const uint8_t>() ? 1 : 2];
  int axis = 0;
  if (x.rank < 1 || !NormalizeAxis(call.attrs.GetInt("axis", 0), x.rank, &axis))
    return OpError(kName, "axis is out of range for " + ShapeStr(x));
  const bool same_kind = x.dtype == y.dtype && x.rank == y.rank;
  bool other_dims_equal = same_kind;
  for (int d = 0; other_dims_equal && d < x.rank; ++d) other_dims_equal = d == axis || x.dims[d] == y.dims[d];
  const auto mismatch = [&] {
    return OpError(kName, "the chosen value " + DTypeStr(x.dtype) + ShapeStr(x) + " does not fit the output " +
                              DTypeStr(y.dtype) + ShapeStr(y));
  };
  if (call.runtime_size) {
    if (!same_kind) return mismatch();
    KILN_RETURN_IF_ERROR(
        ReportRuntimeSize(call, kName, x.dims[axis], other_dims_equal && x.dims[axis] <= y.dims[axis]));
  } else if (!other_dims_equal || x.dims[axis] != y.dims[axis]) {
    return mismatch();
  }
  CopyElems(x, 0, y, 0, x.num_elements);  // packed for the size found
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"Compress", Compress, nullptr, true, {}, /*runtime_size=*/true},
    {"NonZero", NonZero, nullptr, true, {}, /*runtime_size=*/true},
    {"Unique", Unique, UniqueWorkspace, true, {}, /*runtime_size=*/true},
    // Internal: no op table row, so its operands are given here.
    {"kiln.IfOutput", IfOutput, nullptr, true, {3, 3, Arity::kAll, 1, 1}, /*runtime_size=*/true},
};

}  // namespace

std::span<const KernelDef> SelectionKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
