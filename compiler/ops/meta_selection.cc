// Meta functions of Compress, NonZero, Unique and kiln.IfOutput (runtime/kernels/selection.cc).
// Their output sizes depend on the data. When it is a constant (or an input bound with `kiln compile
// --constant-input`, or fixed by a value profile), the size is known and the canonical stage
// folds the node by running the CPU kernel; otherwise the size is a run-time dim
// (ir::RuntimeDim), at most the number of elements or slices it counts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

bool NonZeroAt(const ConstData& d, int64_t i) {
  return IsFloat(d.dtype) ? d.FloatAt(i) != 0.0 : d.IntAt(i) != 0;
}

Status CompressMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Value* cond, Need(ctx, 1, "condition"));
  KILN_RETURN_IF_ERROR(CheckDType(*cond, "condition", kBools));
  KILN_RETURN_IF_ERROR(CheckRank(*cond, "input condition", 1, 1));
  const bool has_axis = ctx.attrs().Has("axis");
  int axis = 0;
  if (has_axis) {
    KILN_RETURN_IF_ERROR(CheckRank(*x, "input", 1, kMaxRank));
    KILN_ASSIGN_OR_RETURN(axis, NormAxis(ctx.attrs().GetInt("axis", 0), x->rank()));
  }
  // Slices past the condition's length are dropped; a longer condition is an error.
  const Sym slices = has_axis ? x->shape[axis] : NumElements(x->shape);
  if (!cond->is_const()) {
    const Sym count = NewRuntimeDim(ctx, 0, Min(cond->shape[0], slices), "count of selected slices");
    SymShape out = has_axis ? x->shape : SymShape{};
    if (has_axis) out[axis] = count;
    else out.push_back(count);
    ctx.SetOutput(0, x->dtype, out);
    return Status::Ok();
  }
  const ConstData* c = cond->data.get();
  std::optional<int64_t> extent = has_axis ? x->shape[axis].value() : StaticCount(*x);
  const int64_t len = c->num_elements();
  if (extent && len > *extent)
    return InvalidArgument("input condition: expected at most " + std::to_string(*extent) + " elements (the " +
                           (has_axis ? "axis dim" : "element count") + "), found " + std::to_string(len));
  int64_t count = 0;
  for (int64_t i = 0; i < len; ++i) count += NonZeroAt(*c, i) ? 1 : 0;
  SymShape out = has_axis ? x->shape : SymShape{};
  if (has_axis) out[axis] = Sym(count);
  else out.push_back(Sym(count));
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

Status NonZeroMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "X", kAll));
  // A scalar counts as one dim, as numpy's nonzero treats it.
  const Sym rows(std::max(1, x->rank()));
  if (!x->is_const()) {
    ctx.SetOutput(0, DType::kInt64, {rows, NewRuntimeDim(ctx, 0, NumElements(x->shape), "count of nonzero elements")});
    return Status::Ok();
  }
  const ConstData* c = x->data.get();
  int64_t count = 0;
  for (int64_t i = 0; i < c->num_elements(); ++i) count += NonZeroAt(*c, i) ? 1 : 0;
  ctx.SetOutput(0, DType::kInt64, {rows, Sym(count)});
  return Status::Ok();
}

// Element order for Unique: integers exactly, floats by value with every NaN equal.
int CompareAt(const ConstData& d, int64_t a, int64_t b) {
  if (!IsFloat(d.dtype)) {
    const int64_t u = d.IntAt(a), v = d.IntAt(b);
    return u < v ? -1 : u > v ? 1 : 0;
  }
  const double u = d.FloatAt(a), v = d.FloatAt(b);
  if (std::isnan(u) || std::isnan(v)) return std::isnan(u) == std::isnan(v) ? 0 : std::isnan(u) ? 1 : -1;
  return u < v ? -1 : u > v ? 1 : 0;
}

Status UniqueMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 4));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "X", kAll));
  const bool has_axis = ctx.attrs().Has("axis");
  int axis = 0;
  if (has_axis) {
    KILN_RETURN_IF_ERROR(CheckRank(*x, "input X", 1, kMaxRank));
    KILN_ASSIGN_OR_RETURN(axis, NormAxis(ctx.attrs().GetInt("axis", 0), x->rank()));
  }
  if (!x->is_const()) {
    const Sym n = has_axis ? x->shape[axis] : NumElements(x->shape);
    const Sym unique = NewRuntimeDim(ctx, 0, n, "count of unique slices");
    SymShape y = has_axis ? x->shape : SymShape{};
    if (has_axis) y[axis] = unique;
    else y.push_back(unique);
    ctx.SetOutput(0, x->dtype, y);
    ctx.SetOutput(1, DType::kInt64, {unique});
    ctx.SetOutput(2, DType::kInt64, {n});
    ctx.SetOutput(3, DType::kInt64, {unique});
    return Status::Ok();
  }
  const ConstData* c = x->data.get();
  // Slices along the axis (single elements without one), compared lexicographically.
  int64_t outer = 1, n = c->num_elements(), inner = 1;
  if (has_axis) {
    n = c->dims[axis];
    // With no elements the dims' products may not fit int64 ([2^40, 2^40, 0]); nothing is compared.
    if (std::find(c->dims.begin(), c->dims.end(), 0) == c->dims.end()) {
      for (int d = 0; d < axis; ++d) outer *= c->dims[d];
      for (size_t d = axis + 1; d < c->dims.size(); ++d) inner *= c->dims[d];
    }
  }
  auto compare = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        if (int r = CompareAt(*c, (o * n + a) * inner + i, (o * n + b) * inner + i)) return r;
    return 0;
  };
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
  int64_t unique = n ? 1 : 0;
  for (int64_t k = 1; k < n; ++k) unique += compare(order[k - 1], order[k]) != 0 ? 1 : 0;
  SymShape y = has_axis ? x->shape : SymShape{};
  if (has_axis) y[axis] = Sym(unique);
  else y.push_back(Sym(unique));
  ctx.SetOutput(0, x->dtype, y);
  ctx.SetOutput(1, DType::kInt64, {Sym(unique)});
  ctx.SetOutput(2, DType::kInt64, {Sym(n)});
  ctx.SetOutput(3, DType::kInt64, {Sym(unique)});
  return Status::Ok();
}

// kiln.IfOutput(cond, then_value, else_value): an output of a run-time If whose branches give
// it different shapes (passes/control_flow/runtime_if.cc), the value of the branch `cond` picks.
// The two shapes have one rank and differ in one dim, `axis` (an attribute the canonical stage
// sets), which becomes a run-time dim bounded by the larger of the two.
Status IfOutputMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* cond, Need(ctx, 0, "cond"));
  KILN_ASSIGN_OR_RETURN(const Value* a, Need(ctx, 1, "then_value"));
  KILN_ASSIGN_OR_RETURN(const Value* b, Need(ctx, 2, "else_value"));
  KILN_RETURN_IF_ERROR(CheckDType(*cond, "cond", kBools));
  KILN_RETURN_IF_ERROR(CheckRank(*cond, "input cond", 0, 0));
  if (a->dtype != b->dtype)
    return InvalidArgument("then_value is " + std::string(DTypeName(a->dtype)) + " and else_value " +
                           std::string(DTypeName(b->dtype)));
  if (a->rank() != b->rank())
    return InvalidArgument("then_value has rank " + std::to_string(a->rank()) + " and else_value " +
                           std::to_string(b->rank()));
  KILN_ASSIGN_OR_RETURN(const int axis, NormAxis(ctx.attrs().GetInt("axis", 0), a->rank()));
  SymShape y = a->shape;
  for (int d = 0; d < a->rank(); ++d)
    if (d != axis && !a->shape[d].Same(b->shape[d]))
      return InvalidArgument("then_value " + ShapeToString(a->shape) + " and else_value " + ShapeToString(b->shape) +
                             " differ in dim " + std::to_string(d) + ", not only in dim " + std::to_string(axis));
  y[axis] = NewRuntimeDim(ctx, 0, Max(a->shape[axis], b->shape[axis]),
                          "size in dim " + std::to_string(axis) + ", that of the branch that ran");
  ctx.SetOutput(0, a->dtype, y);
  return Status::Ok();
}

}  // namespace

void RegisterSelectionOps(std::vector<OpDef>& ops) {
  Def(ops, "Compress", CompressMeta);
  Def(ops, "NonZero", NonZeroMeta);
  Def(ops, "Unique", UniqueMeta);
  Def(ops, "kiln.IfOutput", IfOutputMeta);
}

}  // namespace kiln::ir
