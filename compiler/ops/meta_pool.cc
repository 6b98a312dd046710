// Meta functions of MaxPool (with its optional Indices output), AveragePool, LpPool,
// GlobalAveragePool, GlobalMaxPool and GlobalLpPool.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status PoolMeta(MetaContext& ctx, bool is_max) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, is_max ? 2 : 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "X", is_max ? (kFloats | kInts) : kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 3, 5));
  int n = X->rank() - 2;
  const auto& kernel = ctx.attrs().GetInts("kernel_shape");
  if (static_cast<int>(kernel.size()) != n)
    return InvalidArgument("kernel_shape: expected " + std::to_string(n) +
                           " values (X is " + Str(X->shape) + "), found " + Str(kernel));
  KILN_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx.attrs(), kernel, true));
  if (is_max) {
    int64_t so = ctx.attrs().GetInt("storage_order", 0);
    if (so != 0 && so != 1)
      return InvalidArgument("storage_order: expected 0 or 1, found " + std::to_string(so));
  } else {
    if (int64_t p = ctx.attrs().GetInt("p", 2); p < 1)
      return InvalidArgument("p: expected >= 1, found " + std::to_string(p));
    int64_t cip = ctx.attrs().GetInt("count_include_pad", 0);
    if (cip != 0 && cip != 1)
      return InvalidArgument("count_include_pad: expected 0 or 1, found " + std::to_string(cip));
  }
  SymShape in(X->shape.begin() + 2, X->shape.end());
  KILN_ASSIGN_OR_RETURN(SymShape sp, WindowOutput(ctx, in, w));
  SymShape out = {X->shape[0], X->shape[1]};
  out.insert(out.end(), sp.begin(), sp.end());
  ctx.SetOutput(0, X->dtype, out);
  if (is_max) ctx.SetOutput(1, DType::kInt64, out);  // Indices, flattened positions
  return Status::Ok();
}

Status GlobalPoolMeta(MetaContext& ctx, bool is_max) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "X", kFloats));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 3, 1000));
  SymShape out = {X->shape[0], X->shape[1]};
  out.resize(X->shape.size(), Sym(1));
  ctx.SetOutput(0, X->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterPoolOps(std::vector<OpDef>& ops) {
  Def(ops, "MaxPool", [](MetaContext& c) { return PoolMeta(c, true); });
  Def(ops, "AveragePool", [](MetaContext& c) { return PoolMeta(c, false); });
  Def(ops, "LpPool", [](MetaContext& c) { return PoolMeta(c, false); });
  Def(ops, "GlobalLpPool", [](MetaContext& c) { return GlobalPoolMeta(c, false); });
  Def(ops, "GlobalMaxPool", [](MetaContext& c) { return GlobalPoolMeta(c, true); });
  Def(ops, "GlobalAveragePool", [](MetaContext& c) { return GlobalPoolMeta(c, false); });
}

}  // namespace kiln::ir
