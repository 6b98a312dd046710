// Meta functions of the cumulative ops CumSum and CumProd (opset 14 and 26 forms, which
// differ only in the operation): the output is the input's dtype and shape; `axis` is a
// 0-D int32/int64 input, checked here when constant and by the kernel otherwise.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status CumulativeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "x"));
  KILN_ASSIGN_OR_RETURN(const Value* axis, Need(ctx, 1, "axis"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "x", kFloats | kSignedInts | kUnsignedInts));
  if (x->dtype == DType::kInt8 || x->dtype == DType::kUInt8 || x->dtype == DType::kInt16 ||
      x->dtype == DType::kUInt16)
    return InvalidArgument("input x: expected dtype float32/64, float16, bfloat16, [u]int32 or [u]int64, found " +
                           DTypeStr(x->dtype));
  KILN_RETURN_IF_ERROR(CheckDType(*axis, "axis", kSignedInts));
  if (axis->dtype != DType::kInt32 && axis->dtype != DType::kInt64)
    return InvalidArgument("input axis: expected dtype int32 or int64, found " + DTypeStr(axis->dtype));
  // ONNX says 0-D; exporters also write a one-element 1-D tensor, which the kernel reads alike.
  KILN_RETURN_IF_ERROR(CheckRank(*axis, "input axis", 0, 1));
  if (x->rank() == 0) return InvalidArgument("input x: expected rank >= 1, found a scalar");
  if (auto a = ConstInts(*axis)) {
    if (a->size() != 1)
      return InvalidArgument("input axis: expected one value, found " + std::to_string(a->size()));
    KILN_RETURN_IF_ERROR(NormAxis((*a)[0], x->rank()).status());
  }
  ctx.SetOutput(0, x->dtype, x->shape);
  return Status::Ok();
}

}  // namespace

void RegisterCumulativeOps(std::vector<OpDef>& ops) {
  Def(ops, "CumSum", CumulativeMeta);
  Def(ops, "CumProd", CumulativeMeta);
}

}  // namespace kiln::ir
