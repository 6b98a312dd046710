// Meta functions of the reductions (axes from the optional second input, opset-18 form;
// keepdims; noop_with_empty_axes) and of ArgMax/ArgMin.
#include <algorithm>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// Axes that arrive with each call (value symbols, passes/value_inputs.h: an axes input the model
// does not fix): every output dim is an expression in them, and the CPU kernel reads the axes at
// run time. Dim i is reduced when some axis a is i or i - rank; with keepdims it is then 1, and
// without, the output keeps the other dims in order (rank - len(axes) of them, so the axes must
// be distinct, as ONNX requires). Guards: each axis in [-rank, rank - 1], no axis twice.
Status ReduceOverValueAxes(MetaContext& ctx, const Value& x, const std::vector<Sym>& axes, bool keep) {
  const int64_t r = x.rank(), n = static_cast<int64_t>(axes.size());
  if (!keep && n > r)
    return InvalidArgument("axes: expected at most " + std::to_string(r) + " axes for rank " + std::to_string(r) +
                           " data, found " + std::to_string(n));
  const std::vector<Sym> reduced = ValueAxesHits(ctx, axes, r);
  SymShape out;
  if (keep) {
    for (int64_t i = 0; i < r; ++i) out.push_back(reduced[i] + (Sym(1) - reduced[i]) * x.shape[i]);
  } else {
    out = DimsNotHit(x.shape, reduced, r - n);
  }
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

Status ReduceMeta(MetaContext& ctx, unsigned set) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "data"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "data", set));
  if (ctx.attrs().Has("axes"))
    return InvalidArgument("axes: expected the opset-18 form (axes as input 1), found an 'axes' "
                           "attribute (the importer should have rewritten it)");
  int64_t keep = ctx.attrs().GetInt("keepdims", 1);
  int64_t noop = ctx.attrs().GetInt("noop_with_empty_axes", 0);
  const Value* axes_in = ctx.input(1);
  std::vector<Sym> axes;
  if (axes_in) {
    KILN_RETURN_IF_ERROR(CheckDType(*axes_in, "axes", kSignedInts));
    KILN_RETURN_IF_ERROR(CheckRank(*axes_in, "input axes", 0, 1));
    // An axes input with no elements (int64[0]) is known whatever feeds it: every axis, or none.
    if (auto n = StaticCount(*axes_in); !n || *n != 0) {
      KILN_ASSIGN_OR_RETURN(axes, NeedElements(*axes_in, "axes"));
    }
  }
  if (axes.empty() && noop) {
    ctx.SetOutput(0, X->dtype, X->shape);
    return Status::Ok();
  }
  if (!AllConst(axes)) return ReduceOverValueAxes(ctx, *X, axes, keep != 0);
  std::vector<bool> reduce(X->rank(), axes.empty());
  if (!axes.empty()) {
    KILN_ASSIGN_OR_RETURN(std::vector<int> norm, NormAxes(ConstValues(axes), X->rank()));
    for (int a : norm) reduce[a] = true;
  }
  SymShape out;
  for (int i = 0; i < X->rank(); ++i) {
    if (!reduce[i]) out.push_back(X->shape[i]);
    else if (keep) out.push_back(Sym(1));
  }
  ctx.SetOutput(0, X->dtype, out);
  return Status::Ok();
}

Status ArgMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "data"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "data", kNumeric));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input data", 1, 1000));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", 0), X->rank()));
  bool keep = ctx.attrs().GetInt("keepdims", 1) != 0;
  int64_t last = ctx.attrs().GetInt("select_last_index", 0);
  if (last != 0 && last != 1)
    return InvalidArgument("select_last_index: expected 0 or 1, found " + std::to_string(last));
  SymShape out = X->shape;
  if (keep) out[axis] = Sym(1);
  else out.erase(out.begin() + axis);
  ctx.SetOutput(0, DType::kInt64, out);
  return Status::Ok();
}

}  // namespace

void RegisterReduceOps(std::vector<OpDef>& ops) {
  for (const char* op : {"ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceSum",
                         "ReduceProd", "ReduceLogSum", "ReduceLogSumExp"})
    Def(ops, op, [](MetaContext& c) { return ReduceMeta(c, kFloats | kInts); });
  // Opset 20 allows bool for Max and Min (any / all).
  for (const char* op : {"ReduceMax", "ReduceMin"})
    Def(ops, op, [](MetaContext& c) { return ReduceMeta(c, kFloats | kInts | kBools); });
  Def(ops, "ArgMax", ArgMeta);
  Def(ops, "ArgMin", ArgMeta);
}

}  // namespace kiln::ir
