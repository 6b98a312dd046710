// Meta function of TopK (runtime/kernels/topk.cc): K is the outputs' size along the axis: a
// constant, an expression in the symbols (a value input's), or, when K is computed from tensor
// data, a run-time dim bounded by the axis (the kernel reports it; K above the axis fails the
// call).
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status TopKMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 2));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* kin, Need(ctx, 1, "K"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "X", kNumeric));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "X", 1, kMaxRank));
  if (kin->dtype != DType::kInt64) return InvalidArgument("input K: expected int64, found " + DTypeStr(kin->dtype));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", -1), x->rank()));
  const std::optional<std::vector<Sym>> known = Elements(*kin);
  if (!known) {
    const Sym n = NumElements(kin->shape);
    if (!n.is_const() || *n.value() != 1)
      return InvalidArgument("input K: expected one value, found shape " + ShapeToString(kin->shape));
    SymShape out = x->shape;
    out[axis] = NewRuntimeDim(ctx, 0, x->shape[axis], "K, computed from tensor data");
    ctx.SetOutput(0, x->dtype, out);
    ctx.SetOutput(1, DType::kInt64, out);
    return Status::Ok();
  }
  const std::vector<Sym>& k = *known;
  if (k.size() != 1) return InvalidArgument("input K: expected one value, found " + std::to_string(k.size()));
  if (auto kv = k[0].value()) {
    if (*kv < 0) return InvalidArgument("input K: expected one value >= 0, found [" + std::to_string(*kv) + "]");
    if (auto n = x->shape[axis].value(); n && *kv > *n)
      return InvalidArgument("input K: expected at most " + std::to_string(*n) + " (X dim " + std::to_string(axis) +
                             "), found " + std::to_string(*kv));
  } else {
    // K from a value input (passes/value_inputs.h): at most the axis dim, checked by the
    // prologue; at least 0 by the output dim's own guard.
    AddGuard(ctx, Sym(1) - Lt(x->shape[axis], k[0]));
  }
  SymShape out = x->shape;
  out[axis] = k[0];
  ctx.SetOutput(0, x->dtype, out);
  ctx.SetOutput(1, DType::kInt64, out);
  return Status::Ok();
}

}  // namespace

void RegisterTopKOps(std::vector<OpDef>& ops) { Def(ops, "TopK", TopKMeta); }

}  // namespace kiln::ir
