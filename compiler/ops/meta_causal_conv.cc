// Meta function of CausalConvWithState (opset 27): a causal depthwise 1-D convolution that
// carries its last k-1 input positions from call to call (Mamba, Gated DeltaNet).
// input (B, C, L), weight (C, 1, k), bias (C), past_state (B, C, k-1) ->
// output (B, C, L), present_state (B, C, k-1); activation none|silu|swish.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status CausalConvMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 2));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Value* w, Need(ctx, 1, "weight"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "input", kFloats));
  KILN_RETURN_IF_ERROR(CheckSameDType(*x, "input", *w, "weight"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input input", 3, 3));
  KILN_RETURN_IF_ERROR(CheckRank(*w, "input weight", 3, 3));
  const std::string_view act = ctx.attrs().GetString("activation", "none");
  if (act != "none" && act != "silu" && act != "swish")
    return InvalidArgument("attribute 'activation': expected 'none', 'silu' or 'swish', found '" + std::string(act) +
                           "'");
  const Sym &batch = x->shape[0], &channels = x->shape[1], &k = w->shape[2];
  KILN_RETURN_IF_ERROR(Unify(ctx, channels, w->shape[0], "weight dim 0 (channels)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, Sym(1), w->shape[1], "weight dim 1 (depthwise)"));
  if (auto kv = k.value(); kv && *kv < 1)
    return InvalidArgument("input weight: expected a kernel size >= 1, found " + std::to_string(*kv));
  const SymShape state = {batch, channels, AddC(k, -1)};
  if (const Value* b = Optional(ctx, 2)) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*x, "input", *b, "bias"));
    KILN_RETURN_IF_ERROR(CheckRank(*b, "input bias", 1, 1));
    KILN_RETURN_IF_ERROR(Unify(ctx, channels, b->shape[0], "bias dim 0 (channels)"));
  }
  if (const Value* p = ctx.input(3)) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*x, "input", *p, "past_state"));
    KILN_RETURN_IF_ERROR(CheckRank(*p, "input past_state", 3, 3));
    for (int d = 0; d < 3; ++d)
      KILN_RETURN_IF_ERROR(Unify(ctx, state[d], p->shape[d], "past_state dim " + std::to_string(d)));
  }
  ctx.SetOutput(0, x->dtype, x->shape);
  ctx.SetOutput(1, x->dtype, state);
  return Status::Ok();
}

}  // namespace

void RegisterCausalConvOps(std::vector<OpDef>& ops) { Def(ops, "CausalConvWithState", CausalConvMeta); }

}  // namespace kiln::ir
