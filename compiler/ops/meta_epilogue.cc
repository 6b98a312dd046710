#include "compiler/ops/meta_epilogue.h"

#include <string>

#include <fmt/format.h>

#include "compiler/ops/meta_util.h"
#include "runtime/kernels/epilogue.h"

namespace kiln::ir::meta {

Status CheckEpilogue(MetaContext& ctx, const SymShape& out, DType out_dtype) {
  cpu::EpilogueSpec spec;
  KILN_RETURN_IF_ERROR(cpu::ParseEpilogue(ctx.attrs(), &spec));
  const int residual_index = static_cast<int>(cpu::kEpilogueResidualInput);
  if (ctx.num_inputs() > residual_index + 1)
    return InvalidArgument("expected at most " + std::to_string(residual_index + 1) +
                           " inputs (the last an epilogue residual), found " +
                           std::to_string(ctx.num_inputs()));
  const Value* r = ctx.input(residual_index);
  if (spec.residual && !r)
    return InvalidArgument(fmt::format("{} = 1: expected input {} (the residual), found none",
                                       cpu::kEpilogueResidualAttr, residual_index));
  if (!spec.residual && r)
    return InvalidArgument("input " + std::to_string(residual_index) + " " + Str(r->shape) +
                           ": expected no residual, since " + std::string(cpu::kEpilogueResidualAttr) +
                           " is not 1");
  if (!spec.any()) return Status::Ok();
  if (!IsFloat(out_dtype))
    return InvalidArgument("epilogue: expected a float32, float64, float16 or bfloat16 output, found " +
                           DTypeStr(out_dtype));
  if (r) {
    if (r->dtype != out_dtype)
      return InvalidArgument("residual: expected dtype " + DTypeStr(out_dtype) + " (the output's), found " +
                             DTypeStr(r->dtype));
    bool same = r->shape.size() == out.size();
    for (size_t i = 0; same && i < out.size(); ++i) same = r->shape[i].Same(out[i]);
    if (!same)
      return InvalidArgument("residual: expected exactly the output's shape " + Str(out) + ", found " +
                             Str(r->shape));
  }
  return Status::Ok();
}

}  // namespace kiln::ir::meta
