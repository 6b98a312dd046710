// Meta function of TensorScatter (opset 24), the KV-cache update of attention: `update`
// written into a copy of `past_cache` along `axis` (the sequence axis, never 0, the batch)
// at each batch row's write index; `mode` linear or circular (indices wrap).
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status TensorScatterMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* past, Need(ctx, 0, "past_cache"));
  KILN_ASSIGN_OR_RETURN(const Value* update, Need(ctx, 1, "update"));
  KILN_RETURN_IF_ERROR(CheckDType(*past, "past_cache", kAll));
  KILN_RETURN_IF_ERROR(CheckSameDType(*past, "past_cache", *update, "update"));
  const std::string_view mode = ctx.attrs().GetString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return InvalidArgument("attribute 'mode': expected 'linear' or 'circular', found '" + std::string(mode) + "'");
  KILN_RETURN_IF_ERROR(CheckRank(*past, "input past_cache", 2, kMaxRank));
  if (update->rank() != past->rank())
    return InvalidArgument("input update: expected rank " + std::to_string(past->rank()) + " (as past_cache " +
                           Str(past->shape) + "), found " + Str(update->shape));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", -2), past->rank()));
  if (axis == 0) return InvalidArgument("attribute 'axis': expected a sequence axis, found 0 (the batch axis)");
  for (int d = 0; d < past->rank(); ++d) {
    if (d != axis) {
      KILN_RETURN_IF_ERROR(Unify(ctx, past->shape[d], update->shape[d], "update dim " + std::to_string(d)));
      continue;
    }
    const auto u = update->shape[d].value(), p = past->shape[d].value();
    if (u && p && *u > *p)
      return InvalidArgument("input update: sequence dim " + std::to_string(d) + " is " + std::to_string(*u) +
                             ", more than past_cache's " + std::to_string(*p));
    if (!u || !p) AddGuard(ctx, Lt(update->shape[d], AddS(past->shape[d], Sym(1))));
  }
  if (const Value* w = Optional(ctx, 2)) {
    if (w->dtype != DType::kInt64)
      return InvalidArgument("input write_indices: expected dtype int64, found " + DTypeStr(w->dtype));
    KILN_RETURN_IF_ERROR(CheckRank(*w, "input write_indices", 1, 1));
    KILN_RETURN_IF_ERROR(Unify(ctx, past->shape[0], w->shape[0], "write_indices dim 0 (the batch)"));
  }
  ctx.SetOutput(0, past->dtype, past->shape);
  return Status::Ok();
}

}  // namespace

void RegisterTensorScatterOps(std::vector<OpDef>& ops) { Def(ops, "TensorScatter", TensorScatterMeta); }

}  // namespace kiln::ir
