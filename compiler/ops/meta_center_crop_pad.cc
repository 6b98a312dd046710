// Meta function of CenterCropPad (runtime/kernels/center_crop_pad.cc): the `shape` input sets
// the output's size along `axes`, known at compile time or a value input's symbols.
#include <string>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status CenterCropPadMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input_data"));
  KILN_ASSIGN_OR_RETURN(const Value* shape, Need(ctx, 1, "shape"));
  KILN_RETURN_IF_ERROR(CheckDType(*shape, "shape", kSignedInts));
  if (shape->dtype != DType::kInt32 && shape->dtype != DType::kInt64)
    return InvalidArgument("input shape: expected int32 or int64, found " + DTypeStr(shape->dtype));
  KILN_RETURN_IF_ERROR(CheckRank(*shape, "input shape", 1, 1));
  std::vector<int64_t> axes_attr = ctx.attrs().GetInts("axes");
  if (!ctx.attrs().Has("axes"))
    for (int d = 0; d < x->rank(); ++d) axes_attr.push_back(d);
  KILN_ASSIGN_OR_RETURN(std::vector<int> axes, NormAxes(axes_attr, x->rank()));
  // Sizes from a value input (passes/value_inputs.h) are value symbols: the output dim's own
  // guard checks them at each call.
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> sizes, NeedElements(*shape, "shape"));
  if (sizes.size() != axes.size())
    return InvalidArgument("input shape: expected " + std::to_string(axes.size()) + " values (one per axis), found " +
                           std::to_string(sizes.size()));
  SymShape out = x->shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (sizes[i].is_const() && *sizes[i].value() < 0)
      return InvalidArgument("input shape: expected sizes >= 0, found " + Str(sizes));
    out[axes[i]] = sizes[i];
  }
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterCenterCropPadOps(std::vector<OpDef>& ops) { Def(ops, "CenterCropPad", CenterCropPadMeta); }

}  // namespace kiln::ir
