// Meta functions of the matrix ops in runtime/kernels/matrix.cc: Trilu, EyeLike and Det.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status TriluMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input", 2, kMaxRank));
  if (const Value* k = ctx.input(1)) {
    KILN_RETURN_IF_ERROR(CheckDType(*k, "k", kSignedInts));
    if (k->dtype != DType::kInt64) return InvalidArgument("input k: expected int64, found " + DTypeStr(k->dtype));
    auto n = StaticCount(*k);
    if (k->rank() > 1 || (n && *n != 1)) return InvalidArgument("input k: expected a scalar, found shape " + Str(k->shape));
  }
  ctx.SetOutput(0, x->dtype, x->shape);
  return Status::Ok();
}

Status EyeLikeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input", 2, 2));
  DType out = x->dtype;
  if (const Attr* dt = ctx.attrs().Find("dtype")) {
    if (dt->kind != Attr::Kind::kInt || !IsValidDType(static_cast<int32_t>(dt->i)))
      return InvalidArgument("attribute dtype: expected a supported dtype, found " +
                             (dt->kind == Attr::Kind::kInt ? std::to_string(dt->i) : std::string("a non-integer")));
    out = static_cast<DType>(dt->i);
  }
  if (!InSet(out, kAll))
    return Unimplemented("output dtype: expected a numeric or bool dtype, found " + DTypeStr(out));
  ctx.SetOutput(0, out, x->shape);
  return Status::Ok();
}

Status DetMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "X", kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "X", 2, kMaxRank));
  const int r = x->rank();
  KILN_RETURN_IF_ERROR(Unify(ctx, x->shape[r - 2], x->shape[r - 1], "input X: square matrices (dims -2 and -1)"));
  ctx.SetOutput(0, x->dtype, SymShape(x->shape.begin(), x->shape.end() - 2));
  return Status::Ok();
}

}  // namespace

void RegisterMatrixOps(std::vector<OpDef>& ops) {
  Def(ops, "Trilu", TriluMeta);
  Def(ops, "EyeLike", EyeLikeMeta);
  Def(ops, "Det", DetMeta);
}

}  // namespace kiln::ir
