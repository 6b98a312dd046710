// Meta functions of LRN, LpNormalization and MeanVarianceNormalization
// (runtime/kernels/feature_norm.cc): the output is X's shape and dtype; the attributes are
// checked here so the kernel never sees a bad one.
#include <cmath>
#include <string>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Result<const Value*> FloatX(MetaContext& ctx, int min_rank) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "X", kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input X", min_rank, kMaxRank));
  return x;
}

Status FiniteFloatAttr(const AttrMap& attrs, const char* name, bool positive) {
  const Attr* a = attrs.Find(name);
  if (!a) return Status::Ok();
  if (a->kind != Attr::Kind::kFloat || !std::isfinite(a->f) || (positive && !(a->f > 0)))
    return InvalidArgument(std::string("attribute '") + name + "': expected a finite " + (positive ? "positive " : "") +
                           "float, found " + (a->kind == Attr::Kind::kFloat ? FloatStr(a->f) : "a non-float"));
  return Status::Ok();
}

Status LrnMeta(MetaContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Value* x, FloatX(ctx, 2));
  const Attr* size = ctx.attrs().Find("size");
  if (!size || size->kind != Attr::Kind::kInt || size->i < 1)
    return InvalidArgument("attribute 'size': expected an integer >= 1, found " +
                           (!size ? std::string("none") : size->kind == Attr::Kind::kInt ? std::to_string(size->i)
                                                                                          : "a non-integer"));
  KILN_RETURN_IF_ERROR(FiniteFloatAttr(ctx.attrs(), "alpha", false));
  KILN_RETURN_IF_ERROR(FiniteFloatAttr(ctx.attrs(), "beta", false));
  KILN_RETURN_IF_ERROR(FiniteFloatAttr(ctx.attrs(), "bias", false));
  ctx.SetOutput(0, x->dtype, x->shape);
  return Status::Ok();
}

Status LpNormalizationMeta(MetaContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Value* x, FloatX(ctx, 1));
  KILN_RETURN_IF_ERROR(NormAxis(ctx.attrs().GetInt("axis", -1), x->rank()).status());
  if (int64_t p = ctx.attrs().GetInt("p", 2); p != 1 && p != 2)
    return InvalidArgument("attribute 'p': expected 1 or 2, found " + std::to_string(p));
  ctx.SetOutput(0, x->dtype, x->shape);
  return Status::Ok();
}

Status MeanVarianceNormalizationMeta(MetaContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Value* x, FloatX(ctx, 1));
  const std::vector<int64_t> axes = ctx.attrs().Has("axes") ? ctx.attrs().GetInts("axes")
                                                            : std::vector<int64_t>{0, 2, 3};
  KILN_RETURN_IF_ERROR(NormAxes(axes, x->rank()).status());
  ctx.SetOutput(0, x->dtype, x->shape);
  return Status::Ok();
}

}  // namespace

void RegisterFeatureNormOps(std::vector<OpDef>& ops) {
  Def(ops, "LRN", LrnMeta);
  Def(ops, "LpNormalization", LpNormalizationMeta);
  Def(ops, "MeanVarianceNormalization", MeanVarianceNormalizationMeta);
}

}  // namespace kiln::ir
