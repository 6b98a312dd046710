// Meta functions of LSTM, GRU and RNN (layout 0: X [seq, batch, input]; layout 1: X [batch, seq, input]).
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// Checks that input i (when present) has exactly the shape `want`.
Status ShapeIs(MetaContext& ctx, int i, std::string_view what, const SymShape& want, bool required) {
  const Value* v = ctx.input(i);
  if (!v) {
    if (required) return InvalidArgument("expected input " + std::string(what) + ", found it absent");
    return Status::Ok();
  }
  KILN_RETURN_IF_ERROR(CheckSameDType(*ctx.input(0), "X", *v, what));
  if (v->rank() != static_cast<int>(want.size()))
    return InvalidArgument("input " + std::string(what) + ": expected shape " + Str(want) + ", found " +
                           Str(v->shape));
  for (size_t d = 0; d < want.size(); ++d) {
    const Sym& a = want[d];
    const Sym& b = v->shape[d];
    if (a.Same(b)) continue;
    if (a.is_const() && b.is_const())
      return InvalidArgument("input " + std::string(what) + ": expected shape " + Str(want) +
                             ", found " + Str(v->shape));
    AddGuard(ctx, Eq(a, b));
  }
  return Status::Ok();
}

// LSTM (4 gates, outputs Y, Y_h, Y_c), GRU (3 gates) and RNN (1 gate), both with outputs Y, Y_h.
Status RecurrentMeta(MetaContext& ctx, int64_t gates) {
  const bool lstm = gates == 4;
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, lstm ? 3 : 2));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* W, Need(ctx, 1, "W"));
  KILN_ASSIGN_OR_RETURN(const Value* R, Need(ctx, 2, "R"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "X", kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 3, 3));
  KILN_RETURN_IF_ERROR(CheckRank(*W, "input W", 3, 3));
  KILN_RETURN_IF_ERROR(CheckRank(*R, "input R", 3, 3));
  const int64_t layout = ctx.attrs().GetInt("layout", 0);
  if (layout != 0 && layout != 1) return InvalidArgument("layout: expected 0 or 1, found " + std::to_string(layout));
  std::string dir(ctx.attrs().GetString("direction", "forward"));
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return InvalidArgument("direction: expected forward, reverse or bidirectional, found \"" + dir + "\"");
  int64_t dirs = dir == "bidirectional" ? 2 : 1;
  if (int64_t f = ctx.attrs().GetInt("input_forget", 0); lstm && f != 0 && f != 1)
    return InvalidArgument("input_forget: expected 0 or 1, found " + std::to_string(f));
  // hidden_size: the attribute, else R's last dim (which must be static).
  int64_t H;
  if (ctx.attrs().Has("hidden_size")) {
    H = ctx.attrs().GetInt("hidden_size", 0);
    if (H < 1) return InvalidArgument("hidden_size: expected >= 1, found " + std::to_string(H));
  } else if (auto h = R->shape[2].value()) {
    H = *h;
  } else {
    return Unimplemented("hidden_size: expected the attribute or a static R, found R " + Str(R->shape));
  }
  const bool batch_first = layout == 1;
  const Sym &seq = X->shape[batch_first ? 1 : 0], &batch = X->shape[batch_first ? 0 : 1], &in = X->shape[2];
  const Sym dirs_sym(dirs), hidden(H);
  const SymShape state = batch_first ? SymShape{batch, dirs_sym, hidden} : SymShape{dirs_sym, batch, hidden};
  KILN_RETURN_IF_ERROR(ShapeIs(ctx, 1, "W", {dirs, gates * H, in}, true));
  KILN_RETURN_IF_ERROR(ShapeIs(ctx, 2, "R", {dirs, gates * H, H}, true));
  KILN_RETURN_IF_ERROR(ShapeIs(ctx, 3, "B", {dirs, 2 * gates * H}, false));
  if (const Value* sl = ctx.input(4)) {
    if (sl->dtype != DType::kInt32)
      return InvalidArgument("input sequence_lens: expected int32, found " + DTypeStr(sl->dtype));
    if (sl->rank() != 1)
      return InvalidArgument("input sequence_lens: expected shape [" + batch.ToString() + "], found " +
                             Str(sl->shape));
    KILN_RETURN_IF_ERROR(Unify(ctx, batch, sl->shape[0], "input sequence_lens dim 0 (batch)"));
  }
  KILN_RETURN_IF_ERROR(ShapeIs(ctx, 5, "initial_h", state, false));
  if (lstm) {
    KILN_RETURN_IF_ERROR(ShapeIs(ctx, 6, "initial_c", state, false));
    KILN_RETURN_IF_ERROR(ShapeIs(ctx, 7, "P", {dirs, 3 * H}, false));
  }
  if (batch_first) ctx.SetOutput(0, X->dtype, {batch, seq, dirs_sym, hidden});
  else ctx.SetOutput(0, X->dtype, {seq, dirs_sym, batch, hidden});
  ctx.SetOutput(1, X->dtype, state);
  if (lstm) ctx.SetOutput(2, X->dtype, state);
  return Status::Ok();
}

}  // namespace

void RegisterRnnOps(std::vector<OpDef>& ops) {
  Def(ops, "LSTM", [](MetaContext& ctx) { return RecurrentMeta(ctx, 4); });
  Def(ops, "GRU", [](MetaContext& ctx) { return RecurrentMeta(ctx, 3); });
  Def(ops, "RNN", [](MetaContext& ctx) { return RecurrentMeta(ctx, 1); });
}

}  // namespace kiln::ir
