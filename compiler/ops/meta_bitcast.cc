// Meta function of BitCast (opset 26): the input's bytes reinterpreted as dtype `to` of
// the same width, same shape. Kiln's bool is one byte holding 0 or 1, so only bool itself
// may become bool (other bytes would be bools no kernel expects).
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status BitCastMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "input", kAll));
  const Attr* to = ctx.attrs().Find("to");
  if (!to || to->kind != Attr::Kind::kInt)
    return InvalidArgument("attribute 'to': expected an int (a dtype), found it missing");
  if (!IsValidDType(static_cast<int32_t>(to->i)) || to->i == 0)
    return Unimplemented("attribute 'to': expected a supported dtype, found " + std::to_string(to->i));
  const auto t = static_cast<DType>(to->i);
  if (DTypeSize(t) != DTypeSize(x->dtype))
    return InvalidArgument("attribute 'to': " + DTypeStr(t) + " is " + std::to_string(8 * DTypeSize(t)) +
                           " bits wide, the input " + DTypeStr(x->dtype) + " " +
                           std::to_string(8 * DTypeSize(x->dtype)) + " (BitCast keeps the width)");
  if (t == DType::kBool && x->dtype != DType::kBool)
    return Unimplemented("attribute 'to': bool from " + DTypeStr(x->dtype) +
                         " is not supported (Kiln's bools are bytes holding 0 or 1)");
  ctx.SetOutput(0, t, x->shape);
  return Status::Ok();
}

}  // namespace

void RegisterBitCastOps(std::vector<OpDef>& ops) { Def(ops, "BitCast", BitCastMeta); }

}  // namespace kiln::ir
