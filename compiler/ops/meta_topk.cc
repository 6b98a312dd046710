// Meta function of TopK (runtime/cpu/topk.cc): K must be known at compile time, since it
// is the output's size along the axis.
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
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> k, NeedConstInts(*kin, "K"));
  if (k.size() != 1 || k[0] < 0)
    return InvalidArgument("input K: expected one value >= 0, found " + Str(k));
  if (auto n = x->shape[axis].value(); n && k[0] > *n)
    return InvalidArgument("input K: expected at most " + std::to_string(*n) + " (X dim " + std::to_string(axis) +
                           "), found " + std::to_string(k[0]));
  SymShape out = x->shape;
  out[axis] = Sym(k[0]);
  ctx.SetOutput(0, x->dtype, out);
  ctx.SetOutput(1, DType::kInt64, out);
  return Status::Ok();
}

}  // namespace

void RegisterTopKOps(std::vector<OpDef>& ops) { Def(ops, "TopK", TopKMeta); }

}  // namespace kiln::ir
