// Meta functions of the spatial-transformer pair: AffineGrid (theta -> sampling grid) and
// GridSample (sample X at the grid's normalized coordinates), 2-D and 3-D.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status GridSampleMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* grid, Need(ctx, 1, "grid"));
  if (X->dtype != DType::kFloat32 && X->dtype != DType::kFloat64)
    return Unimplemented("input X: Kiln samples float32 and float64, found " + DTypeStr(X->dtype));
  KILN_RETURN_IF_ERROR(CheckSameDType(*X, "X", *grid, "grid"));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 3, 5));
  const int r = X->rank() - 2;
  if (grid->rank() != X->rank())
    return InvalidArgument("input grid: expected rank " + std::to_string(X->rank()) + " ([N, " +
                           std::to_string(r) + " output dims, " + std::to_string(r) + "]), found " + Str(grid->shape));
  KILN_RETURN_IF_ERROR(Unify(ctx, X->shape[0], grid->shape[0], "input grid dim 0 (batch)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, Sym(r), grid->shape[r + 1], "input grid last dim (one coordinate per spatial dim)"));
  std::string mode(ctx.attrs().GetString("mode", "linear"));
  if (mode != "linear" && mode != "bilinear" && mode != "nearest" && mode != "cubic" && mode != "bicubic")
    return InvalidArgument("attribute 'mode': expected linear, nearest or cubic (bilinear, bicubic before opset 20), "
                           "found \"" + mode + "\"");
  std::string pad(ctx.attrs().GetString("padding_mode", "zeros"));
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    return InvalidArgument("attribute 'padding_mode': expected zeros, border or reflection, found \"" + pad + "\"");
  if (int64_t a = ctx.attrs().GetInt("align_corners", 0); a != 0 && a != 1)
    return InvalidArgument("attribute 'align_corners': expected 0 or 1, found " + std::to_string(a));
  SymShape out = {X->shape[0], X->shape[1]};
  for (int i = 0; i < r; ++i) out.push_back(grid->shape[1 + i]);
  ctx.SetOutput(0, X->dtype, out);
  return Status::Ok();
}

Status AffineGridMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* theta, Need(ctx, 0, "theta"));
  KILN_ASSIGN_OR_RETURN(const Value* size, Need(ctx, 1, "size"));
  if (theta->dtype != DType::kFloat32 && theta->dtype != DType::kFloat64)
    return Unimplemented("input theta: Kiln supports float32 and float64, found " + DTypeStr(theta->dtype));
  if (size->dtype != DType::kInt64) return InvalidArgument("input size: expected int64, found " + DTypeStr(size->dtype));
  if (int64_t a = ctx.attrs().GetInt("align_corners", 0); a != 0 && a != 1)
    return InvalidArgument("attribute 'align_corners': expected 0 or 1, found " + std::to_string(a));
  // Constants, or a value input's symbols (passes/value_inputs.h), which guards check.
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> sz, NeedElements(*size, "input size"));
  if (sz.size() != 4 && sz.size() != 5)
    return InvalidArgument("input size: expected [N, C, H, W] or [N, C, D, H, W], found " + Str(sz));
  for (const Sym& d : sz)
    if (d.is_const() && *d.value() < 1) return InvalidArgument("input size: expected positive dims, found " + Str(sz));
  if (!sz[1].is_const()) AddGuard(ctx, Lt(Sym(0), sz[1]));  // C sets no output dim
  const int64_t r = static_cast<int64_t>(sz.size()) - 2;
  KILN_RETURN_IF_ERROR(CheckRank(*theta, "input theta", 3, 3));
  KILN_RETURN_IF_ERROR(Unify(ctx, sz[0], theta->shape[0], "input theta dim 0 (size[0], batch)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, Sym(r), theta->shape[1], "input theta dim 1 (spatial rank)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, Sym(r + 1), theta->shape[2], "input theta dim 2 (spatial rank + 1)"));
  SymShape out = {theta->shape[0].is_const() ? theta->shape[0] : sz[0]};
  for (int64_t i = 0; i < r; ++i) out.push_back(sz[2 + i]);
  out.push_back(Sym(r));
  ctx.SetOutput(0, theta->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterGridSampleOps(std::vector<OpDef>& ops) {
  Def(ops, "GridSample", GridSampleMeta);
  Def(ops, "AffineGrid", AffineGridMeta);
}

}  // namespace kiln::ir
