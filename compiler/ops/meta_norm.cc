// Meta functions of the normalisation ops (BatchNormalization, InstanceNormalization,
// LayerNormalization) and of Softmax, LogSoftmax and Hardmax.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// Checks a per-channel parameter: a float vector of C elements.
Status ChannelParam(MetaContext& ctx, int i, std::string_view what, const Sym& C) {
  KILN_ASSIGN_OR_RETURN(const Value* v, Need(ctx, i, what));
  KILN_RETURN_IF_ERROR(CheckDType(*v, what, kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*v, "input " + std::string(what), 1, 1));
  return Unify(ctx, C, v->shape[0], "input " + std::string(what) + " dim 0 (channels)");
}

Status BatchNormMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 3));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "X", kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 2, 1000));
  if (int64_t t = ctx.attrs().GetInt("training_mode", 0); t != 0)
    return Unimplemented("training_mode=" + std::to_string(t) + ": expected inference mode (0)");
  if (ctx.output(1) || ctx.output(2))
    return Unimplemented("running_mean/running_var outputs are for training mode; found them used");
  const Sym& C = X->shape[1];
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 0; i < 4; ++i) KILN_RETURN_IF_ERROR(ChannelParam(ctx, i + 1, names[i], C));
  ctx.SetOutput(0, X->dtype, X->shape);
  return Status::Ok();
}

Status InstanceNormMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "input", kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input", 3, 1000));
  KILN_RETURN_IF_ERROR(ChannelParam(ctx, 1, "scale", X->shape[1]));
  KILN_RETURN_IF_ERROR(ChannelParam(ctx, 2, "B", X->shape[1]));
  ctx.SetOutput(0, X->dtype, X->shape);
  return Status::Ok();
}

// GroupNormalization: scale and bias are per channel (opset 21), as the CPU kernel expects.
Status GroupNormMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "X", kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 3, 1000));
  int64_t g = ctx.attrs().GetInt("num_groups", 0);
  if (g < 1) return InvalidArgument("num_groups: expected >= 1, found " + std::to_string(g));
  const Sym& C = X->shape[1];
  if (auto c = C.value(); c && *c % g != 0)
    return InvalidArgument("num_groups " + std::to_string(g) + ": expected a divisor of the channels, found " +
                           std::to_string(*c) + " channels");
  KILN_RETURN_IF_ERROR(ChannelParam(ctx, 1, "scale", C));
  KILN_RETURN_IF_ERROR(ChannelParam(ctx, 2, "bias", C));
  ctx.SetOutput(0, X->dtype, X->shape);
  return Status::Ok();
}

// `p` must broadcast (unidirectionally) to the normalised dims X[axis:].
Status NormParam(MetaContext& ctx, const Value& p, std::string_view what, const SymShape& tail) {
  if (p.rank() > static_cast<int>(tail.size()))
    return InvalidArgument("input " + std::string(what) + ": expected a shape broadcastable to " +
                           Str(tail) + ", found " + Str(p.shape));
  for (int i = 0; i < p.rank(); ++i) {
    const Sym& d = p.shape[p.rank() - 1 - i];
    const Sym& t = tail[tail.size() - 1 - i];
    if (d.Same(t) || (d.is_const() && *d.value() == 1)) continue;
    if (d.is_const() && t.is_const())
      return InvalidArgument("input " + std::string(what) + ": expected a shape broadcastable to " +
                             Str(tail) + ", found " + Str(p.shape));
    AddGuard(ctx, Eq(d, t));
  }
  return Status::Ok();
}

Status LayerNormMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 3));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* scale, Need(ctx, 1, "Scale"));
  const Value* B = ctx.input(2);
  KILN_RETURN_IF_ERROR(CheckDType(*X, "X", kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 1, 1000));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", -1), X->rank()));
  SymShape tail(X->shape.begin() + axis, X->shape.end());
  KILN_RETURN_IF_ERROR(CheckDType(*scale, "Scale", kFloats));
  KILN_RETURN_IF_ERROR(NormParam(ctx, *scale, "Scale", tail));
  if (B) {
    KILN_RETURN_IF_ERROR(CheckDType(*B, "B", kFloats));
    KILN_RETURN_IF_ERROR(NormParam(ctx, *B, "B", tail));
  }
  int64_t stash = ctx.attrs().GetInt("stash_type", 1);
  if (!IsValidDType(static_cast<int32_t>(stash)) || !IsFloat(static_cast<DType>(stash)))
    return InvalidArgument("stash_type: expected a float dtype, found " + std::to_string(stash));
  ctx.SetOutput(0, X->dtype, X->shape);
  SymShape stat(X->shape.begin(), X->shape.begin() + axis);
  stat.resize(X->shape.size(), Sym(1));
  ctx.SetOutput(1, static_cast<DType>(stash), stat);
  ctx.SetOutput(2, static_cast<DType>(stash), stat);
  return Status::Ok();
}

// Softmax, LogSoftmax, Hardmax: the output has the input's shape whatever the axis.
// Kiln's coerce_2d=1 (pre-opset-13 semantics) changes the values, not the shape.
Status SoftmaxMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "input", kFloats));
  bool coerce = ctx.attrs().GetInt("coerce_2d", 0) != 0;
  int64_t axis = ctx.attrs().GetInt("axis", coerce ? 1 : -1);
  if (X->rank() == 0) {
    if (axis != 0 && axis != -1)
      return InvalidArgument("axis: expected 0 or -1 for a scalar input, found " + std::to_string(axis));
  } else if (coerce) {
    // Pre-opset-13: axis in [-r, r]; the input is viewed as [prod(:axis), prod(axis:)].
    if (axis < -X->rank() || axis > X->rank())
      return InvalidArgument("axis: expected a value in [" + std::to_string(-X->rank()) + ", " +
                             std::to_string(X->rank()) + "], found " + std::to_string(axis));
  } else {
    KILN_RETURN_IF_ERROR(NormAxis(axis, X->rank()).status());
  }
  ctx.SetOutput(0, X->dtype, X->shape);
  return Status::Ok();
}

}  // namespace

void RegisterNormOps(std::vector<OpDef>& ops) {
  Def(ops, "BatchNormalization", BatchNormMeta);
  Def(ops, "InstanceNormalization", InstanceNormMeta);
  Def(ops, "LayerNormalization", LayerNormMeta);
  Def(ops, "GroupNormalization", GroupNormMeta);
  Def(ops, "Softmax", SoftmaxMeta);
  Def(ops, "LogSoftmax", SoftmaxMeta);
  Def(ops, "Hardmax", SoftmaxMeta);
}

}  // namespace kiln::ir
