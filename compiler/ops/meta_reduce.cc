// Meta functions of the reductions (axes from the optional second input, opset-18 form;
// keepdims; noop_with_empty_axes) and of ArgMax/ArgMin.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

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
  std::vector<int64_t> axes;
  if (axes_in) {
    KILN_RETURN_IF_ERROR(CheckDType(*axes_in, "axes", kSignedInts));
    KILN_RETURN_IF_ERROR(CheckRank(*axes_in, "input axes", 0, 1));
    KILN_ASSIGN_OR_RETURN(axes, NeedConstInts(*axes_in, "axes"));
  }
  std::vector<bool> reduce(X->rank(), false);
  if (axes.empty()) {
    if (noop) {
      ctx.SetOutput(0, X->dtype, X->shape);
      return Status::Ok();
    }
    reduce.assign(X->rank(), true);
  } else {
    KILN_ASSIGN_OR_RETURN(std::vector<int> norm, NormAxes(axes, X->rank()));
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
